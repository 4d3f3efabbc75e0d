"""Mirostat (Basu et al. 2021): s_hat, k and the mu update against hand-computed values, its top-k against the
project's, the state restarted per generation, seeded and batch-free samples, the mean surprise reaching tau on a
stationary distribution, and its settings."""

import numpy as np
import pytest
import torch
from conftest import prompts_table

from oversmooth.analysis.decoding import Decoding, top_k
from oversmooth.core.catalog import byte_sampling_methods, token_methods
from oversmooth.generation.mirostat import (
    Mirostat,
    sampling_decodings,
    sampler_decoding_settings,
    top_k_size,
    zipf_exponent,
)
from oversmooth.generation.samples import sample_model
from oversmooth.generation.sampling import draw, generate, uniforms_for
from oversmooth.models.bytelm import GPTByteLM
from oversmooth.models.model import GPT, GPTConfig
from oversmooth.workflow.config import ConfigError, load_config

LN2 = np.log(2)


def test_s_hat_is_the_least_squares_slope_through_the_origin_of_the_top_m():
    p = np.log([[0.125, 0.5, 0.125, 0.25]])  # sorted: 1/2, 1/4, 1/8, 1/8; b = ln 2, ln 2, 0
    # m = 3: t = ln 2, ln 3/2 -> (ln2 ln2 + ln3/2 ln2) / (ln2^2 + ln3/2^2) = 0.7615000 / 0.6448550
    assert zipf_exponent(p, 3) == pytest.approx([1.180886], abs=1e-6)
    # m = 100 > V = 4: every pair, t_3 = ln 4/3 with b_3 = 0 adds to the denominator only: 0.7615000 / 0.7276160
    assert zipf_exponent(p, 100) == pytest.approx([1.046569], abs=1e-6)
    zipf = -1.3 * np.log(np.arange(1, 257.0))
    assert zipf_exponent((zipf - np.logaddexp.reduce(zipf))[None], 100) == pytest.approx([1.3])
    # zeros: the pairs whose second entry is 0 are left out; one nonzero probability has no s_hat
    zeros = np.array([[-LN2, -LN2, -np.inf, -np.inf], [0.0, -np.inf, -np.inf, -np.inf]])
    s = zipf_exponent(zeros, 100)
    assert s[0] == 0.0 and np.isnan(s[1])


def test_k_follows_their_formula_rounded_plus_one_within_one_and_v():
    # s = 1.5, mu = 6, V = 256: (0.5 * 64 / (1 - 256^-0.5))^(1/1.5) = 34.1333^(2/3) = 10.517 -> round 11, + 1
    # s = 1 (eps = 0): the limit 2^mu / ln V = 8 / 5.545 = 1.443 -> 1 + 1 = 2
    # s = 0 (a flat top): V where 2^mu > V - 1, else 1; no s_hat: 1; s near 0 with a large mu: V (no overflow)
    s = np.array([1.5, 1.0, 0.0, 0.0, np.nan, 1e-6])
    mu = np.array([6.0, 3.0, 9.0, 7.0, 6.0, 40.0])
    assert top_k_size(s, mu, 256).tolist() == [12, 2, 256, 1, 1, 256]


def test_the_step_distribution_is_the_projects_top_k_and_mu_learns_from_the_drawn_surprise():
    logp = np.log(np.array([[0.1, 0.25, 0.25, 0.4], [0.25, 0.25, 0.25, 0.25]]))  # ties at the cut
    mirostat = Mirostat(tau=1.0, lr=0.1, m=100)
    mirostat.restart(2)
    k = mirostat.k(logp)
    for row, size in zip(range(2), k):
        np.testing.assert_array_equal(mirostat(logp)[row], top_k(logp[row], int(size)))  # ties by byte order
    drawn = draw(torch.from_numpy(logp), mirostat, torch.tensor([0.99, 0.0]))
    # row 0 draws among its top k; its surprise -log2 p under the untruncated model: mu = 2 - 0.1 (S - 1)
    surprise = -np.log2(np.exp(logp[[0, 1], drawn.numpy()]))
    np.testing.assert_allclose(mirostat.mu, 2.0 - 0.1 * (surprise - 1.0))
    assert surprise[1] == 2.0 and mirostat.mu[1] == pytest.approx(1.9)  # a quarter: 2 bits, mu 2 - 0.1 (2 - 1)


class StationaryStepper:
    """The same next-symbol distribution at every step (a stationary source), for any batch."""

    block_size = 10**9

    def __init__(self, logprobs: torch.Tensor):
        self.logprobs, self.rows = logprobs, 0

    def start(self, window: torch.Tensor) -> torch.Tensor:
        self.rows = window.size(0)
        return self.logprobs.expand(self.rows, -1)

    def step(self, byte: torch.Tensor) -> torch.Tensor:
        return self.logprobs.expand(self.rows, -1)

    def cached(self) -> int:
        return 0


def test_on_a_stationary_distribution_the_mean_surprise_approaches_tau():
    """Zipf(1.1) over 256 symbols (entropy 5.4 bits, its argmax 2.2): after n draws the mean surprise is tau +
    (mu_0 - mu_n) / (lr n) exactly, so it reaches tau as mu stays bounded."""
    zipf = -1.1 * np.log(np.arange(1, 257.0))
    logp = torch.from_numpy(zipf - np.logaddexp.reduce(zipf))[None]
    mirostat, surprises = Mirostat(tau=3.5, lr=0.1), []
    observe = mirostat.observe
    mirostat.observe = lambda rows, drawn: (surprises.append(-rows[np.arange(len(drawn)), drawn] / LN2),
                                            observe(rows, drawn))
    generate(StationaryStepper(logp), torch.zeros(4, 1, dtype=torch.long), mirostat, uniforms_for([1, 2, 3, 4], 4000))
    surprises = np.array(surprises)  # (steps, rows)
    np.testing.assert_allclose(surprises.mean(0), 3.5 + (7.0 - mirostat.mu) / (0.1 * 4000))
    assert np.abs(surprises.mean(0) - 3.5).max() < 0.01
    assert np.abs(surprises[2000:].mean(0) - 3.5).max() < 0.05  # not only on average from mu's start


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=2, n_head=2, n_embd=32, bottleneck=4))
    return GPTByteLM("bn-4", model.double().eval())


def test_samples_are_seeded_and_each_generation_restarts_the_state(lm, tmp_path):
    """The same samples from a fresh object and from one that has sampled before (mu restarts at 2 tau each
    generation), whatever the batch: a row depends on its own uniforms alone."""
    prompts = prompts_table(5, 10, 10)
    used = Mirostat(tau=4.0)
    first = sample_model(lm, prompts, [used], tmp_path / "a.parquet", continuation_bytes=24, batch_size=2, seed=1)
    assert used.mu is not None and not np.allclose(used.mu, 8.0)  # the last batch moved mu
    again = sample_model(lm, prompts, [used], tmp_path / "b.parquet", continuation_bytes=24, batch_size=5, seed=1)
    fresh = sample_model(lm, prompts.slice(1), [Mirostat(tau=4.0)], tmp_path / "c.parquet", continuation_bytes=24,
                         batch_size=3, seed=1)
    continuations = first.column("continuation").to_pylist()
    assert continuations == again.column("continuation").to_pylist()
    assert continuations[1:] == fresh.column("continuation").to_pylist()
    pure = sample_model(lm, prompts, [Decoding("pure")], tmp_path / "d.parquet", continuation_bytes=24, batch_size=5,
                        seed=1)
    assert pure.column("continuation").to_pylist() != continuations  # the method's own seeds, its own bytes
    assert set(first.column("method").to_pylist()) == {"mirostat"}


def test_a_bad_setting_names_its_key(tmp_path):
    with pytest.raises(ValueError, match=r"decoding\.mirostat_tau: 0 must be > 0.*decoding\.mirostat_m: 1 must be"):
        Mirostat(tau=0, m=1)
    with pytest.raises(RuntimeError, match="call restart"):
        Mirostat(tau=3.0)(np.zeros((2, 4)))
    for text, message in [
        ("decoding:\n  methods: [pure, mirostat]\n", "list it in decoding.sampler_methods"),
        ("decoding:\n  mirostat_lr: 0\n", r"decoding\.mirostat_lr: 0 is less than or equal to the minimum of 0"),
        ("decoding:\n  mirostat_m: 2.5\n", r"decoding\.mirostat_m: 2\.5 is not of type 'integer'"),
        ("decoding:\n  sampler_methods: []\ntokens:\n  sampling:\n    methods: [pure, mirostat]\n",
         r"tokens\.sampling\.methods: \['mirostat'\] are not in"),
    ]:
        (tmp_path / "bad.yaml").write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config("config/config.yaml", tmp_path / "bad.yaml")


def test_the_config_turns_it_on_per_model_with_tau_per_byte_or_per_token(tmp_path):
    (tmp_path / "on.yaml").write_text("decoding:\n  sampler_methods: [mirostat]\n  mirostat_tau: 2.5\n"
                                      "tokens:\n  sampling:\n    methods: null\n")
    config = load_config("config/config.yaml", tmp_path / "on.yaml")
    for model in ("bn-4", "mos-4", "gt-nanogpt"):
        assert byte_sampling_methods(config, model)[-1] == "mirostat"
    assert "mirostat" not in byte_sampling_methods(config, "svd-r4")  # svd.decoding alone
    assert token_methods(config) == [*config["decoding"]["methods"], *config["decoding"]["bat_methods"], "mirostat"]
    byte = sampler_decoding_settings(config["decoding"], byte_sampling_methods(config, "bn-4"))
    token = sampler_decoding_settings(config["decoding"], token_methods(config), token=True)
    assert (byte["mirostat_tau"], token["mirostat_tau"]) == (2.5, 3.0)  # per byte, per token
    assert (byte["mirostat_lr"], byte["mirostat_m"]) == (0.1, 100)
    without = sampler_decoding_settings(config["decoding"], ["pure", "top_k"])
    assert "mirostat_tau" not in without  # a mirostat setting reruns no job that does not sample it
    built = sampling_decodings(byte)
    assert [d.method for d in built] == byte["methods"] and built[2] == Decoding("top_k", top_k=5)
    assert (built[-1].tau, built[-1].lr, built[-1].m) == (2.5, 0.1, 100)
