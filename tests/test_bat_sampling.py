"""BAT sampling: the solver asked about single tokens answers as the definition (one LP per token) does,
the sampler that decides only the tokens it draws samples exactly the kept set's distribution, and a solver failure
stops it with a message instead of a guess."""

from __future__ import annotations

import re

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
from workflow_helpers import min_q_i_by_interior_point

from oversmooth.analysis.bat.result import BATResult
from oversmooth.analysis.bat.sampler import (
    BATSampler,
    BATSamplingError,
    bat_decodings,
    bat_threshold,
    redraw_uniforms,
)
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.decoding import Decoding, apply_decoding, epsilon_sampling
from oversmooth.analysis.reference import bat_reject_set


def random_instance(V, k, seed, scale):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(V, k))
    logits = scale * W @ rng.normal(size=k) / np.sqrt(k)
    p = np.exp(logits - logits.max())
    return W, p / p.sum()


def definition_kept(p, W, threshold, tokens=None):
    """The kept set by the definition: every token at or above the threshold or tied with the largest, and each below
    it that one linprog does not reject (without HiGHS's presolve, which finds some of these LPs infeasible)."""
    rejected, failures = bat_reject_set(p, W, threshold=threshold, tokens=tokens, presolve=False)
    assert not failures
    return ~rejected | (p >= threshold) | (p == p.max())


def enumerate_draws(sampler, p, threshold):
    """The exact distribution of `sampler.draw` over its uniforms: every sequence of draws, each uniform at the
    middle of the drawn token's interval of the CDF (without the tokens rejected before it), weighted by the chance
    of landing in that interval."""
    V, out = len(p), np.zeros(len(p))

    def explore(script, weight, removed):
        proposal = np.where(removed, 0.0, p)
        cdf = np.cumsum(proposal)
        for j in np.flatnonzero(proposal > 0):
            middle = (cdf[j] - proposal[j] / 2) / cdf[-1]
            taken = []

            def uniforms():
                for u in [*script, middle]:
                    taken.append(u)
                    yield u

            try:
                token = sampler.draw(p, threshold, uniforms())
            except ValueError:  # it asked for another uniform: j was rejected
                assert len(taken) == len(script) + 1
                now_removed = removed.copy()
                now_removed[j] = True
                explore([*script, middle], weight * proposal[j] / cdf[-1], now_removed)
                continue
            assert token == j
            out[j] += weight * proposal[j] / cdf[-1]

    explore([], 1.0, np.zeros(V, dtype=bool))
    return out


@pytest.mark.parametrize("V, k, seed, scale, threshold", [(8, 2, 0, 3.0, 0.12), (10, 3, 4, 2.5, 0.09),
                                                          (12, 2, 9, 4.0, 0.05)])
def test_deciding_only_the_drawn_tokens_samples_the_kept_sets_distribution_exactly(V, k, seed, scale, threshold):
    W, p = random_instance(V, k, seed, scale)
    kept = definition_kept(p, W, threshold)
    assert 0 < (~kept).sum() and (kept & (p < threshold)).any()  # both verdicts below the threshold
    sampled = enumerate_draws(BATSampler(W, TBATSettings(threshold=0.5)), p, threshold)
    expected = np.where(kept, p, 0.0) / p[kept].sum()
    assert sampled == pytest.approx(expected, abs=1e-12)
    assert BATSampler(W).kept(p, threshold).tolist() == kept.tolist()


@pytest.mark.parametrize("V, k, seed, scale", [(256, 4, 1, 6.0), (256, 16, 2, 8.0), (256, 64, 3, 8.0)])
@pytest.mark.parametrize("threshold", [3e-4, 3e-3, 0.02])
def test_single_token_questions_answer_as_one_lp_per_token_at_a_samplers_thresholds(V, k, seed, scale, threshold):
    W, p = random_instance(V, k, seed, scale)
    sampler = BATSampler(W)
    below = np.flatnonzero(p < threshold)
    asked = below[np.argsort(-p[below])][:: max(1, len(below) // 12)]  # the heaviest down to the lightest
    expected = ~definition_kept(p, W, threshold, tokens=asked)[asked]
    assert [sampler.is_rejected(p, int(i), threshold) for i in asked] == expected.tolist()
    assert sampler.stats.questions == len(asked) and sampler.stats.rejected == expected.sum()


@pytest.mark.parametrize("V, k, seed, scale, tuned, reached", [
    (256, 16, 11, 6.0, {}, "lp"),  # one LP over every token
    (2500, 32, 3, 6.0, {}, None),  # a large vocabulary: the screen, the repairs, column generation
    (2500, 16, 5, 4.0, {"FREE_COLUMNS": 4, "FREE_PER_ROW": 0, "ASKED_FREE_COLUMNS": 4}, None),  # tail vertices
    (4000, 48, 2, 6.0, {"DESCENT_ROWS": 0}, "polished"),  # the projections and the polish (asked: no descent)
    (4000, 48, 2, 6.0, {"DESCENT_ROWS": 0, "ASKED_POLISH_ONLY": False}, "polished"),  # and with the descent
])
@pytest.mark.parametrize("threshold", [3e-4, 0.2])
def test_asked_tokens_get_the_verdicts_of_the_whole_reject_set_on_every_path(monkeypatch, V, k, seed, scale, tuned,
                                                                              reached, threshold):
    from oversmooth.analysis.bat import settings
    from oversmooth.analysis.bat.solver import BATSolver

    for name, value in tuned.items():
        monkeypatch.setattr(settings, name, value)
    W, p = random_instance(V, k, seed, scale)
    solver = BATSolver(W, TBATSettings(threshold=0.5))  # the threshold of each call is the one given
    whole = solver.reject_set(p, threshold=threshold)
    below, rng = np.flatnonzero(p <= threshold), np.random.default_rng(0)
    verdicts = [below[whole.rejected[below] == verdict] for verdict in (True, False)]
    assert not whole.failed and all(len(tokens) for tokens in verdicts)
    asked = np.concatenate([rng.choice(tokens, size=min(12, len(tokens)), replace=False) for tokens in verdicts])
    paths = set()
    for i in asked:
        result = solver.reject_set(p, np.array([i]), threshold)
        assert not result.failed and result.rejected[i] == whole.rejected[i], i
        assert result.rejected.sum() == result.rejected[i]  # the tokens not asked about are left out
        paths |= {key for key in ("polished", "descended") if key in result.stats} | ({"lp"} if result.lp_solves else set())
    if reached and threshold < 0.01:  # the papers' thresholds reach the path (0.2: the screen settles them all)
        assert reached in paths


def test_the_full_kept_set_is_the_tbat_reject_sets_complement_and_epsilons_superset():
    W, p = random_instance(256, 8, 5, 8.0)
    logprobs = np.log(p)[None]
    for decoding in bat_decodings([Decoding("ba_epsilon", epsilon=3e-3), Decoding("ba_eta", eta=3e-3)], W):
        decoded = decoding(logprobs)[0]
        threshold = bat_threshold(decoding.decoding, logprobs)[0]
        kept = definition_kept(p, W, threshold)
        assert np.isfinite(decoded).tolist() == kept.tolist()
        assert np.exp(decoded).sum() == pytest.approx(1.0, abs=1e-12)
        assert (np.isfinite(epsilon_sampling(logprobs, threshold)[0]) <= kept).all()  # BA keeps what epsilon keeps
        assert (~kept).any() and (kept & (p < threshold)).any()


def test_ba_etas_threshold_is_eta_samplings():
    peaked = np.full(16, 0.01 / 15)
    peaked[0] = 0.99
    logprobs = np.log(np.stack([np.full(16, 1 / 16), peaked]))
    eta = 0.1  # uniform row: H = ln 16, so sqrt(eta) exp(-H) = sqrt(0.1) / 16 < eta; the peaked row: eta
    assert bat_threshold(Decoding("ba_eta", eta=eta), logprobs) == pytest.approx([np.sqrt(0.1) / 16, eta])
    assert bat_threshold(Decoding("ba_epsilon", epsilon=eta), logprobs).tolist() == [eta, eta]


def test_a_solver_failure_stops_the_sampler_naming_the_token_instead_of_a_guess(monkeypatch):
    W, p = random_instance(64, 4, 0, 6.0)
    sampler = BATSampler(W)
    monkeypatch.setattr(sampler.solver, "reject_set", lambda p, asked, threshold: BATResult(
        np.zeros(len(p), dtype=bool), failed=True, stats={"status": "kInfeasible"}))
    light = int(np.argmin(p))
    uniform = float(np.cumsum(p)[light] - p[light] / 2)  # lands on the lightest token
    with pytest.raises(BATSamplingError, match=f"token {light} .*kInfeasible"):
        sampler.draw(p, 0.01, redraw_uniforms(uniform))


def test_tokens_at_or_above_the_threshold_and_the_largest_ask_the_solver_nothing(monkeypatch):
    W, p = random_instance(64, 4, 0, 6.0)
    sampler = BATSampler(W)
    monkeypatch.setattr(sampler, "is_rejected", lambda *args: pytest.fail("asked the solver"))
    cdf = np.cumsum(p)
    for token in np.flatnonzero(p >= 0.01):
        assert sampler.draw(p, 0.01, redraw_uniforms(float(cdf[token] - p[token] / 2))) == token
    top = int(np.argmax(p))  # every token below a threshold above the largest: only the largest is kept unasked
    assert sampler.draw(p, 0.99, redraw_uniforms(float(cdf[top] - p[top] / 2))) == top


def test_a_bat_method_without_its_head_fails_naming_the_model_and_the_method():
    with pytest.raises(ValueError, match="mos-4: ba_eta needs the head's matrix"):
        bat_decodings([Decoding("pure"), Decoding("ba_eta")], None, model="mos-4")
    assert bat_decodings([Decoding("pure")], None) == [Decoding("pure")]
    with pytest.raises(ValueError, match="ba_epsilon decides tokens with the model's head matrix"):
        apply_decoding(np.zeros((1, 4)), Decoding("ba_epsilon"))


def test_a_samples_tokens_do_not_depend_on_the_batch_and_ba_epsilon_keeps_what_epsilon_keeps():
    """A small GPT's BA-epsilon samples: every byte at or above epsilon or proved kept; rows sampled alone and in a
    batch give the same bytes."""
    from oversmooth.generation.sampling import GPTStepper, generate, uniforms_for
    from oversmooth.models.bytelm import GPTByteLM
    from oversmooth.models.model import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig(block_size=32, n_layer=1, n_head=2, n_embd=32, bottleneck=4, dropout=0.0)).eval()
    lm = GPTByteLM("bn-4", model)
    W = model.output_matrix().detach().double().numpy()
    decoding = bat_decodings([Decoding("ba_epsilon", epsilon=0.01)], W)[0]
    prefixes = torch.randint(0, 256, (3, 5))
    uniforms = uniforms_for([11, 12, 13], 12)
    together = generate(GPTStepper(lm), prefixes, decoding, uniforms)
    alone = torch.cat([generate(GPTStepper(lm), prefixes[i : i + 1], decoding, uniforms[i : i + 1])
                       for i in range(3)])
    assert torch.equal(together, alone)
    stats = decoding.sampler.stats
    assert stats.tokens == 2 * 3 * 12 and stats.questions > 0  # a random head's bytes are near uniform: 1/256 < 0.01
    # each byte drawn is in the kept set of its position (every byte is below epsilon here: each one proved kept)
    logprobs = lm.next_byte_logprobs(torch.cat([prefixes, together], dim=1))[:, 4:-1].double().numpy()
    kept = np.isfinite(decoding(logprobs))
    assert (np.exp(logprobs) < 0.01).all() and (kept.sum(-1) < 256).any()
    assert np.take_along_axis(kept, together.numpy()[..., None], axis=-1).all()


def test_at_a_threshold_of_zero_bat_sampling_keeps_every_token_without_asking_the_solver():
    W = np.random.default_rng(0).normal(size=(16, 3))
    logits = np.random.default_rng(1).normal(size=(2, 16))
    logprobs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    for decoding in bat_decodings([Decoding("ba_epsilon", epsilon=0.0), Decoding("ba_eta", eta=0.0)], W):
        np.testing.assert_allclose(decoding(logprobs), logprobs, atol=1e-12)
        assert decoding.sampler.stats.questions == 0


@pytest.mark.workflow
@pytest.mark.reads_smoke_run
@pytest.mark.parametrize("model", ["bn-4", "tok-svd-r4"])
def test_drawn_tokens_of_the_smoke_runs_positions_are_decided_as_the_definition_decides_them(smoke_run, model):
    """At real positions (a byte model's logits, a token head over 49,152 tokens), the tokens BA-epsilon's and
    BA-eta's draws ask about: the solver's verdicts are one linprog's per token."""
    from oversmooth.analysis.tokenheads import head_matrix, load_head, sampled_state_rows
    from oversmooth.extraction.logit_tables import sampled_logit_rows
    from oversmooth.models.torchfile import read_output_matrix

    results = smoke_run[1] / "results"
    if model.startswith("tok-"):
        head = load_head(results / "models" / model / "head.pt")[0]
        W, rows = head_matrix(head), sampled_state_rows(head, results / "tokens" / "eval.states.parquet", 4, 0)
    else:
        W = read_output_matrix(results / "models" / model / "best.pt")
        rows = sampled_logit_rows(results / "logits" / f"{model}.parquet", 4, 0)
    sampler, rng, verdicts = BATSampler(W), np.random.default_rng(0), set()
    # thresholds above the papers' (3e-4): the smoke run's models are barely trained (bn-4: no byte below 3e-3)
    decodings = [Decoding("ba_epsilon", epsilon=5e-3), Decoding("ba_epsilon", epsilon=1e-2)] if model == "bn-4" \
        else [Decoding("ba_epsilon", epsilon=3e-4), Decoding("ba_eta", eta=3e-4)]
    for decoding in decodings:
        for logprobs in rows.logprobs.astype(np.float64):
            p = np.exp(logprobs) / np.exp(logprobs).sum()
            threshold = float(bat_threshold(decoding, logprobs))
            below = np.flatnonzero((p < threshold) & (p > 0))  # as a draw meets them: in proportion to p
            drawn = rng.choice(below, size=min(3, len(below)), replace=False, p=p[below] / p[below].sum())
            asked = np.union1d(drawn, below[np.argmin(p[below])])  # and the lightest, the likeliest rejected
            expected = ~definition_kept(p, W, threshold, tokens=asked)[asked]
            assert [sampler.is_rejected(p, int(i), threshold) for i in asked] == expected.tolist()
            verdicts |= set(expected.tolist())
    assert verdicts == {True, False}


@pytest.mark.workflow
def test_the_smoke_run_samples_bat_methods_where_a_head_is_one_softmax_and_logs_their_progress(smoke_run):
    """config/smoke.yaml: decoding.bat_methods [ba_epsilon, ba_eta] (epsilon 0.005), the token track's ba_eta."""
    results = smoke_run[1] / "results"
    for model, expected in (("bn-4", {"ba_epsilon", "ba_eta"}), ("gt-nanogpt", {"ba_epsilon", "ba_eta"}),
                            ("mos-4", set()), ("svd-r4", set()), ("tok-svd-r4", {"ba_eta"}), ("tok-full", {"ba_eta"})):
        methods = set(pq.read_table(results / "samples" / f"{model}.parquet", columns=["method"])
                      .column("method").to_pylist())
        assert methods & {"ba_epsilon", "ba_eta"} == expected, model
    log = (results / "logs" / "samples" / "bn-4.log").read_text()
    line = next(line for line in log.splitlines() if "ba_epsilon" in line and "solver questions" in line)
    questions = int(re.search(r"\(\d+ of (\d+) drawn tokens rejected\)", line).group(1))
    assert "tokens/s" in line and questions > 0  # bn-4's bytes are all below 0.0034: each draw asks the solver
    # a token head's BA-eta in a CPU job of its own (rule sample_bat), whose rows its samples joined
    for model in ("tok-svd-r4", "tok-full"):
        log = (results / "logs" / "samples" / f"{model}.ba_eta.log").read_text()
        assert any("ba_eta" in line and "solver questions" in line for line in log.splitlines()), model
        alone = pq.read_table(results / "samples" / f"{model}.ba_eta.parquet")
        joined = pq.read_table(results / "samples" / f"{model}.parquet")
        assert joined.filter(pc.equal(joined.column("method"), "ba_eta")).equals(alone), model


@pytest.mark.workflow
@pytest.mark.reads_smoke_run
def test_the_full_heads_verdicts_on_drawn_tokens_are_the_definitions(smoke_run):
    """SmolLM2's own head (49,152 x 576) at an evaluation state, BA-epsilon's threshold (3e-4): a token drawn below
    it in proportion to p and the lightest one a draw reaches (p > 1e-7), each decided as the sampler asks, against
    the definition's LP over every token (a point of P with q_i = 0, or a dual bound above zero_tol)."""
    from oversmooth.analysis.bat.polytope import row_basis
    from oversmooth.analysis.tokenheads import output_weight, sampled_state_rows
    from oversmooth.models.causallm import load_causal_lm

    results = smoke_run[1] / "results"
    head = output_weight(load_causal_lm(results / "data" / "smollm2")[0])
    W = head.double().numpy()
    logprobs = sampled_state_rows(head, results / "tokens" / "eval.states.parquet", 1, seed=7).logprobs[0]
    p, threshold = np.exp(logprobs) / np.exp(logprobs).sum(), 3e-4
    Q = row_basis(W, TBATSettings().rank_tol)
    sampler = BATSampler(W, basis=Q)
    below = np.flatnonzero((p < threshold) & (p > 1e-7))
    drawn = np.random.default_rng(0).choice(below, p=p[below] / p[below].sum())
    verdicts = []
    for token in (drawn, below[np.argmin(p[below])]):
        q_i, bound = min_q_i_by_interior_point(Q, p, int(token), threshold)
        verdicts.append(sampler.is_rejected(p, int(token), threshold))
        assert q_i <= 1e-9 if verdicts[-1] else bound > 1e-9, token
    assert verdicts == [False, True]  # kept, rejected
