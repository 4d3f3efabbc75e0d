"""Decoding transforms on hand-made distributions (shared by the metrics and the sampler)."""

import math
from pathlib import Path

import numpy as np
import pytest

from oversmooth.analysis.decoding import (
    PARAMETER,
    Decoding,
    decoding_settings,
    decodings_from_config,
    greedy,
    nucleus_mask,
    temperature,
    top_k,
    top_p,
)
from oversmooth.analysis.reference import nucleus_mask_by_sort


def logp(*probs):
    with np.errstate(divide="ignore"):
        return np.log(np.array(probs, dtype=np.float64))


def test_greedy_is_one_hot_on_the_argmax_and_the_lower_byte_wins_ties():
    assert np.exp(greedy(logp(0.2, 0.5, 0.3))).tolist() == [0.0, 1.0, 0.0]
    assert np.exp(greedy(logp(0.4, 0.4, 0.2))).tolist() == [1.0, 0.0, 0.0]


def test_top_k_keeps_k_bytes_renormalised():
    out = np.exp(top_k(logp(0.1, 0.4, 0.2, 0.3), 2))
    assert out.tolist() == pytest.approx([0.0, 4 / 7, 0.0, 3 / 7])
    assert np.exp(top_k(logp(0.25, 0.25, 0.25, 0.25), 2)).tolist() == pytest.approx([0.5, 0.5, 0.0, 0.0])
    assert np.exp(top_k(logp(0.5, 0.5), 5)).tolist() == pytest.approx([0.5, 0.5])  # k above V keeps all


def test_top_p_keeps_the_smallest_set_reaching_p():
    # sorted 0.5, 0.3, 0.15, 0.05: 0.5 < 0.7, 0.8 >= 0.7 -> keep the first two
    assert np.exp(top_p(logp(0.15, 0.5, 0.05, 0.3), 0.7)).tolist() == pytest.approx([0.0, 0.625, 0.0, 0.375])
    # exactly reaching p stops there
    assert np.exp(top_p(logp(0.5, 0.25, 0.25), 0.5)).tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert np.exp(top_p(logp(0.6, 0.4), 1.0)).tolist() == pytest.approx([0.6, 0.4])


def test_temperature_sharpens_by_powers():
    out = np.exp(temperature(logp(0.2, 0.8), 0.5))
    assert out.tolist() == pytest.approx([0.04 / 0.68, 0.64 / 0.68])
    assert np.exp(temperature(logp(0.2, 0.8), 1.0)).tolist() == pytest.approx([0.2, 0.8])


def test_nucleus_mask_matches_the_thesis_example():
    assert nucleus_mask(np.array([0.8, 0.2, 0.0]), 0.7).tolist() == [True, False, False]
    assert nucleus_mask(np.array([0.1, 0.2, 0.7]), 0.75).tolist() == [False, True, True]


def test_transforms_work_on_batches_and_return_distributions():
    z = np.random.default_rng(0).standard_normal((3, 7, 256))
    x = z - np.log(np.exp(z).sum(-1, keepdims=True))
    for decoding in decodings_from_config(
        {"methods": ["pure", "greedy", "top_k", "top_p", "temperature"], "top_k": 5, "top_p": 0.9, "temperature": 0.8}
    ):
        out = decoding(x)
        assert out.shape == x.shape
        assert np.allclose(np.exp(out).sum(-1), np.ones((3, 7)))
    assert ((np.exp(Decoding("top_k", top_k=5)(x)) > 0).sum(-1) == 5).all()


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="unknown decoding method 'beam'"):
        Decoding("beam")
    with pytest.raises(ValueError, match="top-p needs 0 < p <= 1, got 1.5"):
        top_p(logp(0.5, 0.5), 1.5)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        temperature(logp(0.5, 0.5), 0.0)
    assert math.isinf(greedy(logp(0.5, 0.5))[1])


def test_nucleus_over_a_large_vocabulary_is_the_sorted_definition_with_ties_in_index_order():
    """Rows whose nucleus fits in the top candidates and rows that need the full sort (flat ones), with ties."""
    rng = np.random.default_rng(0)
    V = 5000

    def softmax(z):
        return np.exp(z) / np.exp(z).sum(-1, keepdims=True)

    peaked = softmax(rng.standard_normal((6, V)) * 6)
    flat = softmax(rng.standard_normal((4, V)) * 0.1)  # nucleus of thousands: beyond the candidates
    tied = np.full((2, V), 1.0 / V)  # every entry ties: the first ones by index
    probs = np.concatenate([peaked, flat, tied])
    for tau in (0.5, 0.9, 0.999):
        mask = nucleus_mask(probs, tau)
        assert np.array_equal(mask, nucleus_mask_by_sort(probs, tau))
    assert nucleus_mask(tied, 0.5)[0, : V // 2].all() and not nucleus_mask(tied, 0.5)[0, V // 2 + 1 :].any()
    assert nucleus_mask(flat, 0.9).sum(-1).min() > 1024


def test_top_k_keeps_ties_in_index_order_like_a_stable_sort():
    values = logp(0.1, 0.3, 0.3, 0.3, 0.0)[None]
    kept = np.exp(top_k(values, 2))
    assert kept[0].tolist() == pytest.approx([0.0, 0.5, 0.5, 0.0, 0.0])


def warper_kept(method: str, parameter: float, logits: np.ndarray) -> np.ndarray:
    """The entries transformers' own logits warper for `method` keeps (float64 logits, one token at least)."""
    import torch
    from transformers import EpsilonLogitsWarper, EtaLogitsWarper, MinPLogitsWarper, TypicalLogitsWarper

    warper = {"epsilon": EpsilonLogitsWarper, "eta": lambda eta: EtaLogitsWarper(eta, device="cpu"),
              "typical": TypicalLogitsWarper, "min_p": MinPLogitsWarper}[method](parameter)
    return torch.isfinite(warper(None, torch.from_numpy(logits))).numpy()


def random_logits(seed: int, rows: int = 64, vocab: int = 256) -> np.ndarray:
    """Rows from flat to peaked: Gaussian logits at scales 0.1 to 8, a few rows with exact ties."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(rows, vocab)) * np.geomspace(0.1, 8, rows)[:, None]
    logits[:4, : vocab // 2] = logits[:4, vocab // 2 :]  # every value twice
    return logits


@pytest.mark.parametrize("method, parameters", [
    ("epsilon", (1e-4, 3e-4, 1e-3, 0.01, 0.2)),
    ("eta", (1e-4, 3e-4, 2e-3, 0.05)),
    ("typical", (0.2, 0.5, 0.9, 0.95, 0.999)),
    ("min_p", (0.01, 0.05, 0.1, 0.5, 1.0)),
])
def test_the_truncation_samplers_keep_what_transformers_warpers_keep(method, parameters):
    """epsilon, eta, typical and min-p against EpsilonLogitsWarper, EtaLogitsWarper, TypicalLogitsWarper and
    MinPLogitsWarper on random logits from flat to peaked, rows with ties included: the same kept set, renormalised."""
    for seed in range(3):
        logits = random_logits(seed)
        logprobs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
        for parameter in parameters:
            ours = Decoding(method, **{PARAMETER[method]: parameter})(logprobs)
            kept = np.isfinite(ours)
            assert (kept == warper_kept(method, parameter, logits)).all(), (method, parameter, seed)
            np.testing.assert_allclose(np.exp(ours).sum(-1), 1.0, atol=1e-12)
            np.testing.assert_allclose(ours[kept], (logprobs - np.log(np.exp(np.where(kept, logprobs, -np.inf)).sum(-1,
                                       keepdims=True)))[kept], atol=1e-12)


def test_the_truncation_samplers_by_hand():
    p = logp(0.5, 0.3, 0.15, 0.04, 0.01)
    assert np.isfinite(Decoding("epsilon", epsilon=0.04)(p)).tolist() == [True, True, True, True, False]
    exact = logp(0.5, 0.25, 0.0625, 0.0625, 0.0625, 0.0625)  # exp(log p) == p: the cut falls exactly on a value
    assert np.isfinite(Decoding("epsilon", epsilon=0.25)(exact)).tolist() == [True, True, False, False, False, False]
    assert np.isfinite(Decoding("epsilon", epsilon=0.0625)(exact)).all()  # >= epsilon kept, as transformers does
    assert np.isfinite(Decoding("min_p", min_p=0.3)(p)).tolist() == [True, True, True, False, False]  # >= 0.15
    h = -(np.exp(p) * p).sum()  # 1.1671 nats: eta = min(0.1, sqrt(0.1) exp(-h)) = 0.0984
    assert math.isclose(h, 1.16714, rel_tol=1e-5)
    assert np.isfinite(Decoding("eta", eta=0.1)(p)).tolist() == [True, True, True, False, False]
    assert np.isfinite(Decoding("eta", eta=0.2)(p)).tolist() == [True, True, True, False, False]  # at 0.139
    assert np.isfinite(Decoding("eta", eta=0.3)(p)).tolist() == [True, True, False, False, False]  # at 0.170
    # typical: |-log p - h| = 0.474, 0.037, 0.730, 2.052, 3.438: 0.3 first, then 0.5 (0.8), then 0.15 (0.95)
    assert np.isfinite(Decoding("typical", typical_p=0.8)(p)).tolist() == [True, True, False, False, False]
    assert np.isfinite(Decoding("typical", typical_p=0.81)(p)).tolist() == [True, True, True, False, False]
    assert np.isfinite(Decoding("epsilon", epsilon=0.9)(p)).tolist() == [True, False, False, False, False]  # the top


def test_typical_sampling_keeps_the_most_typical_byte_and_drops_the_most_probable_as_transformers_does():
    """Typical sampling keeps at least the byte whose surprise is nearest the entropy, not the most probable one:
    p = (0.4, 0.1 x 6) has H = 1.75 nats; the 0.1s' surprise (2.30) is nearer it than 0.4's (0.92), so at mass 0.2 the
    six tied 0.1s are kept (a value cut keeps ties) and 0.4 is dropped; epsilon, eta and min-p keep it at any value."""
    p = logp(0.4, *[0.1] * 6)[None]
    kept = np.isfinite(Decoding("typical", typical_p=0.2)(p))
    assert kept[0].tolist() == [False] + [True] * 6
    assert (kept == warper_kept("typical", 0.2, p)).all()
    for method, parameter in (("epsilon", 0.5), ("eta", 0.5), ("min_p", 1.0)):
        assert np.isfinite(Decoding(method, **{PARAMETER[method]: parameter})(p))[0, 0], method
    # and docs/stages.md says so, not that every method keeps the most probable byte
    stages = " ".join((Path(__file__).parents[1] / "docs" / "stages.md").read_text().split())
    assert "typical keeps at least the most typical one, which need not be the most probable" in stages
    assert "each keeping at least the most probable byte" not in stages


def test_decoding_settings_keep_the_parameters_of_the_methods_run():
    section = {"methods": ["pure", "epsilon"], "top_k": 5, "top_p": 0.9, "temperature": 0.8, "epsilon": 3e-4,
               "eta": 3e-4, "typical_p": 0.95, "min_p": 0.1}
    assert decoding_settings(section) == {"methods": ["pure", "epsilon"], "epsilon": 3e-4}
    assert decoding_settings(section, ["pure"]) == {"methods": ["pure"]}
    assert decodings_from_config(decoding_settings(section)) == [Decoding("pure"), Decoding("epsilon", epsilon=3e-4)]


@pytest.mark.workflow
def test_the_truncation_samplers_keep_what_transformers_keeps_on_real_positions(smoke_run):
    """The same comparison on the smoke run's logits files: a bottleneck model's and the ground truth's positions."""
    from oversmooth.extraction.logit_tables import iter_logits

    _, workdir, _ = smoke_run
    for model in ("bn-4", "gt-nanogpt"):
        logprobs = next(iter_logits(workdir / "results" / "logits" / f"{model}.parquet")).logprobs.astype(np.float64)
        logprobs -= np.logaddexp.reduce(logprobs, axis=-1, keepdims=True)
        for method, parameter in (("epsilon", 3e-4), ("epsilon", 0.01), ("eta", 3e-4), ("eta", 0.01), ("typical", 0.2),
                                  ("typical", 0.95), ("min_p", 0.05), ("min_p", 0.1)):
            kept = np.isfinite(Decoding(method, **{PARAMETER[method]: parameter})(logprobs))
            assert (kept == warper_kept(method, parameter, logprobs)).all(), (model, method, parameter)
            assert 1 <= kept.sum(-1).min() and kept.sum(-1).max() <= 256
