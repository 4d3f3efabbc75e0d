"""Oversmoothing metrics against hand-computed cases, the thesis's example, the definitions, and invariants."""

import math

import numpy as np
import pandas as pd
import pytest

from oversmooth.analysis import reference
from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.metrics import METRICS, oversmoothing
from oversmooth.analysis.summary import bootstrap_weights, describe, summarise


def log(probs):
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(probs, dtype=np.float64))


def metrics_of(p_bn, p_gt, tau):
    values = oversmoothing(log([p_bn]), log([p_gt]), tau)
    return {k: v.item() for k, v in values.items()}


def test_thesis_three_token_example():
    gt = [0.8, 0.2, 0.0]
    a = metrics_of([0.7, 0.2, 0.1], gt, 0.7)
    b = metrics_of([0.8, 0.0, 0.2], gt, 0.7)
    assert a["tto"] == pytest.approx(0.1) and b["tto"] == pytest.approx(0.2)
    assert a["nsmd"] == pytest.approx(0.1) and b["nsmd"] == pytest.approx(0.0)  # B keeps the nucleus mass
    assert a["tv"] == pytest.approx(0.1) and b["tv"] == pytest.approx(0.2)
    assert a["kl"] == pytest.approx(0.8 * math.log(0.8 / 0.7))
    assert b["kl"] == math.inf  # B gives 0 to a byte the ground truth can emit
    assert a["nucleus_size"] == 1


def test_entropy_difference_hand_computed():
    out = metrics_of([0.5, 0.5], [1.0, 0.0], 0.9)
    assert out["entropy_diff"] == pytest.approx(math.log(2))  # flatter model: positive
    assert out["kl"] == pytest.approx(math.log(2))


def test_nsmd_can_be_negative_when_the_model_is_spikier():
    out = metrics_of([0.9, 0.05, 0.05], [0.6, 0.3, 0.1], 0.5)  # nucleus {0}
    assert out["nsmd"] == pytest.approx(-0.3)
    assert out["tto"] == pytest.approx(0.0)


def random_pairs(n, v, seed):
    rng = np.random.default_rng(seed)
    p_gt = rng.dirichlet(np.full(v, 0.1), size=n)
    p_bn = rng.dirichlet(np.full(v, 0.5), size=n)
    return p_bn, p_gt


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_metrics_equal_the_per_position_definitions(seed):
    p_bn, p_gt = random_pairs(40, 256, seed)
    p_bn[0] = p_gt[0]
    p_bn[1, :128] = 0.0
    p_bn[1] /= p_bn[1].sum()
    tau = 0.9
    out = oversmoothing(log(p_bn), log(p_gt), tau)
    for i in range(len(p_bn)):
        assert out["tto"][i].item() == pytest.approx(reference.tto(p_bn[i], p_gt[i], tau), abs=1e-12)
        assert out["nsmd"][i].item() == pytest.approx(reference.nsmd(p_bn[i], p_gt[i], tau), abs=1e-12)
        assert out["tv"][i].item() == pytest.approx(reference.tv(p_bn[i], p_gt[i]), abs=1e-12)
        assert out["kl"][i].item() == pytest.approx(reference.kl(p_bn[i], p_gt[i]), rel=1e-9)
        assert out["entropy_diff"][i].item() == pytest.approx(reference.entropy_diff(p_bn[i], p_gt[i]), abs=1e-9)
        assert out["nucleus_size"][i].item() == len(reference.nucleus_set(p_gt[i], tau))
    assert math.isinf(out["kl"][1].item())


def test_invariants_on_random_distributions_and_decodings():
    p_bn, p_gt = random_pairs(200, 256, 5)
    logp_bn, logp_gt = log(p_bn), log(p_gt)
    for method in ("pure", "greedy", "top_k", "top_p", "temperature"):
        out = oversmoothing(Decoding(method)(logp_bn), logp_gt, 0.9)
        assert (out["nsmd"] <= out["tto"] + 1e-12).all()
        assert ((out["tv"] >= 0) & (out["tv"] <= 1 + 1e-12)).all()
        assert (out["kl"] >= -1e-12).all()
    # NSMD over the nucleus equals minus the same sum over its complement (appendix C)
    from oversmooth.analysis.decoding import nucleus_mask

    nucleus = nucleus_mask(p_gt, 0.9)
    diff = p_gt - p_bn
    assert np.allclose(np.where(nucleus, diff, 0).sum(-1), -np.where(nucleus, 0, diff).sum(-1))


def test_everything_is_zero_when_the_model_equals_the_ground_truth():
    _, p_gt = random_pairs(10, 256, 3)
    logp = log(p_gt)
    out = oversmoothing(logp, logp, 0.9)
    for name in METRICS:
        tolerance = 1e-5 if name == "kl_eps" else 1e-12  # the mixture moves the model by at most eps
        assert np.allclose(out[name], np.zeros(10), atol=tolerance), name


def test_describe_hand_computed_and_infinite_values_counted_not_averaged():
    values = np.array([1.0, 3.0, np.inf, 5.0])
    clusters = np.array([0, 0, 1, 1])
    weights = np.array([[2, 0], [0, 2], [1, 1]])
    out = describe(values, clusters, weights, 0.95)
    assert out["mean"] == pytest.approx(3.0)
    assert out["sd"] == pytest.approx(2.0)
    assert out["n_infinite"] == 1 and out["n_positions"] == 3 and out["n_prompts"] == 2
    # replicate means: cluster 0 twice -> 2, cluster 1 twice -> 5, both -> 3
    assert out["ci_low"] == pytest.approx(np.quantile([2, 5, 3], 0.025))
    assert out["ci_high"] == pytest.approx(np.quantile([2, 5, 3], 0.975))


def test_bootstrap_is_seeded_and_resamples_whole_prompts():
    assert np.array_equal(bootstrap_weights(7, 50, seed=3), bootstrap_weights(7, 50, seed=3))
    assert (bootstrap_weights(7, 50, seed=3).sum(1) == 7).all()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"prompt_id": np.repeat(np.arange(20), 10), "method": "pure", **{m: rng.normal(size=200) for m in METRICS}}
    )
    summary = summarise(frame, n_boot=400, confidence=0.95, seed=1, metrics=METRICS)
    row = summary[summary["metric"] == "tto"].iloc[0]
    assert row["ci_low"] < row["mean"] < row["ci_high"]
    assert row["n_prompts"] == 20 and row["n_positions"] == 200
    assert summary.equals(summarise(frame, n_boot=400, confidence=0.95, seed=1, metrics=METRICS))


def test_kl_eps_is_the_kl_to_the_uniform_mixture_and_finite_after_greedy():
    eps = 1e-3
    p_gt = [0.7, 0.2, 0.1, 0.0]
    out = metrics_of([1.0, 0.0, 0.0, 0.0], p_gt, 0.9)
    mixed = [(1 - eps) * q + eps / 4 for q in (1.0, 0.0, 0.0, 0.0)]
    values = oversmoothing(log([[1.0, 0.0, 0.0, 0.0]]), log([p_gt]), 0.9, eps)
    assert values["kl_eps"].item() == pytest.approx(reference.kl(mixed, p_gt))
    assert math.isinf(out["kl"]) and math.isfinite(out["kl_eps"])
    with pytest.raises(ValueError, match="metrics.kl_epsilon must be in"):
        oversmoothing(np.zeros((1, 2)), np.zeros((1, 2)), 0.9, 0.0)


def test_a_truth_with_zeros_hand_computed():
    # a truncated truth (known support): bytes 2 and 3 at probability 0, log-probability -inf; 0 log 0 = 0 throughout
    truth = [0.5, 0.5, 0.0, 0.0]
    eps = 1e-3
    with np.errstate(all="raise"):  # no NaN or inf slips through a masked term unnoticed
        smooth = oversmoothing(log([[0.4, 0.4, 0.1, 0.1]]), log([truth]), 0.9, eps)
        alike = oversmoothing(log([[0.6, 0.4, 0.0, 0.0]]), log([truth]), 0.9, eps)  # zeros where the truth has them
        spike = oversmoothing(log([[1.0, 0.0, 0.0, 0.0]]), log([truth]), 0.9, eps)  # a zero where the truth has mass
    out = {k: v.item() for k, v in smooth.items()}
    assert out["nucleus_size"] == 2  # {0, 1}: the mass before byte 1 (0.5) is below 0.9
    assert out["tto"] == pytest.approx(0.2) and out["nsmd"] == pytest.approx(0.2) and out["tv"] == pytest.approx(0.2)
    assert out["kl"] == pytest.approx(math.log(0.5 / 0.4))  # 2 x 0.5 log(0.5 / 0.4); the truth's zeros add 0
    mixed = [(1 - eps) * q + eps / 4 for q in (0.4, 0.4)]
    assert out["kl_eps"] == pytest.approx(sum(0.5 * math.log(0.5 / m) for m in mixed))
    h_model = -(2 * 0.4 * math.log(0.4) + 2 * 0.1 * math.log(0.1))
    assert out["entropy_diff"] == pytest.approx(h_model - math.log(2))
    out = {k: v.item() for k, v in alike.items()}
    assert out["kl"] == pytest.approx(0.5 * math.log(0.5 / 0.6) + 0.5 * math.log(0.5 / 0.4))  # finite: 0 log 0/0 = 0
    assert out["tto"] == 0.0 and out["nsmd"] == pytest.approx(0.0) and out["tv"] == pytest.approx(0.1)
    assert out["entropy_diff"] == pytest.approx(-(0.6 * math.log(0.6) + 0.4 * math.log(0.4)) - math.log(2))
    out = {k: v.item() for k, v in spike.items()}
    assert out["kl"] == math.inf and out["kl_eps"] == pytest.approx(
        0.5 * math.log(0.5 / (1 - eps + eps / 4)) + 0.5 * math.log(0.5 / (eps / 4)))
    assert out["tto"] == 0.0 and out["nsmd"] == pytest.approx(0.0) and out["tv"] == pytest.approx(0.5)
    assert out["entropy_diff"] == pytest.approx(-math.log(2))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_truncated_truth_equals_the_definitions(seed):
    # the truth: a random distribution under epsilon-sampling (zeros at most bytes), against smooth models
    p_bn, p_gt = random_pairs(30, 256, seed)
    logp_gt = Decoding("epsilon", epsilon=0.01)(log(p_gt))
    assert np.isneginf(logp_gt).any(-1).all()
    truth = np.exp(logp_gt)
    out = oversmoothing(log(p_bn), logp_gt, 0.9)
    for i in range(len(p_bn)):
        assert out["tto"][i].item() == pytest.approx(reference.tto(p_bn[i], truth[i], 0.9), abs=1e-12)
        assert out["nsmd"][i].item() == pytest.approx(reference.nsmd(p_bn[i], truth[i], 0.9), abs=1e-12)
        assert out["tv"][i].item() == pytest.approx(reference.tv(p_bn[i], truth[i]), abs=1e-12)
        assert out["kl"][i].item() == pytest.approx(reference.kl(p_bn[i], truth[i]), rel=1e-9)
        assert out["entropy_diff"][i].item() == pytest.approx(reference.entropy_diff(p_bn[i], truth[i]), abs=1e-9)
    assert all(np.isfinite(out[name]).all() for name in METRICS)


def test_docs_document_the_parquet_schemas(repo):
    from oversmooth.analysis.decodedrows import decoded_schema
    from oversmooth.analysis.metrics import POSITION_SCHEMA
    from oversmooth.extraction.logit_tables import LOGITS_SCHEMA, hidden_schema

    readme = (repo / "docs" / "stages.md").read_text()
    hidden = hidden_schema(7, 3)
    for schema in (LOGITS_SCHEMA, hidden, POSITION_SCHEMA, decoded_schema(256)):
        for field in schema:
            documented = str(field.type).replace("[7]", "[d]").replace("[3]", "[k]")
            assert f"| `{field.name}` | `{documented}` |" in readme, field.name
