"""The BAT solver, split from one module (src/oversmooth/analysis/tbat.py at SPLIT_FROM) into the sub-package
oversmooth.analysis.bat, answers as it did: against the single module loaded beside it
(benchmarks/shared.module_at), the same reject sets, LP solves and step counts on random heads through every path,
and the same reject sets on the smoke run's heads at every position and decoding method of their TBAT jobs."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from workflow_helpers import module_at, repo_config

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.solver import BATSolver

SPLIT_FROM = "8a256f1"  # main's last revision with the solver in the single module tbat.py


@pytest.fixture(scope="module")
def single_module():
    """src/oversmooth/analysis/tbat.py at SPLIT_FROM, loaded beside today's package (git's history is needed)."""
    return module_at(SPLIT_FROM, "src/oversmooth/analysis/tbat.py")


def random_instance(V, k, seed, scale, kept=None):
    """A head W (V x k) and an output p = softmax(W z) of it (as tests/test_tbat.py draws them), truncated to its
    `kept` most probable tokens where given (as top-k or top-p leave it)."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(V, k))
    logits = scale * W @ rng.normal(size=k) / np.sqrt(k)
    p = np.exp(logits - logits.max())
    if kept is not None:
        p[np.argsort(-p)[kept:]] = 0.0
    return W, p / p.sum()


@pytest.mark.parametrize("V, k, seed, scale, kept, tuned", [
    (64, 64, 3, 3.0, None, {}),  # full rank: no LP
    (64, 8, 7, 3.0, None, {}),  # the byte track: one LP per model
    (256, 16, 11, 6.0, None, {}),  # the same, both verdicts
    (2500, 32, 3, 6.0, None, {}),  # a large vocabulary: the screen's three moves, the repairs, its LPs' free tokens
    (2500, 16, 5, 4.0, None, {"FREE_COLUMNS": 4, "FREE_PER_ROW": 0}),  # column generation: tail vertices priced in
    (2500, 16, 5, 4.0, 300, {}),  # the same on 300 tokens with mass
    # where the descent follows: the projections, the descent and the polish (here on 1,500 tokens with mass); the
    # descent's witnesses where nothing else runs before it; the tokens below its floor to the polish directly
    (4000, 48, 2, 6.0, None, {"DESCENT_ROWS": 0}),
    (4000, 48, 2, 4.0, 1500, {"DESCENT_ROWS": 0}),
    (4000, 48, 2, 6.0, None, {"DESCENT_ROWS": 0, "PROJECTION_ROUNDS": 0, "REPAIR_ROUNDS": 0}),
    (4000, 48, 2, 6.0, None, {"DESCENT_ROWS": 0, "PROJECTION_ROUNDS": 0, "REPAIR_ROUNDS": 0, "DESCENT_FLOOR": 1e-3}),
])
def test_the_package_answers_as_the_single_module_did_on_every_path(single_module, monkeypatch, V, k, seed, scale,
                                                                     kept, tuned):
    for name, value in tuned.items():  # the same tuning in both
        monkeypatch.setattr(settings, name, value)
        monkeypatch.setattr(single_module, name, value)
    W, p = random_instance(V, k, seed, scale, kept)
    now, before = BATSolver(W).reject_set(p), single_module.BATSolver(W).reject_set(p)
    assert not now.failed and not before.failed and now.rejected.any() == (k < V)
    assert np.array_equal(now.rejected, before.rejected)
    assert (now.lp_solves, now.stats) == (before.lp_solves, before.stats)  # each step settled the same tokens


@pytest.mark.workflow
@pytest.mark.parametrize("model", ["bn-4", "bn-64", "tok-svd-r4"])
def test_the_package_answers_as_the_single_module_did_at_the_smoke_runs_tbat_positions(smoke_run, single_module,
                                                                                       model):
    """Every row of the model's TBAT job (its positions after each decoding method, rebuilt as the job builds them):
    the package's reject set, LP solves and step counts are the single module's, and its TBAT the job's."""
    from oversmooth.analysis.decoding import decodings_from_config
    from oversmooth.analysis.tokenheads import head_matrix, load_head, sampled_state_rows
    from oversmooth.extraction.logit_tables import sampled_logit_rows
    from oversmooth.models.torchfile import read_output_matrix
    from oversmooth.workflow.outputs import token_tbat_methods, token_tbat_positions

    results, config = smoke_run[1] / "results", repo_config("smoke.yaml")
    if model.startswith("tok-"):
        head = load_head(results / "models" / model / "head.pt")[0]
        W = head_matrix(head)
        rows = sampled_state_rows(head, results / "tokens" / "eval.states.parquet",
                                  token_tbat_positions(config, model), config["seed"])
        methods = token_tbat_methods(config, model)
    else:
        W = read_output_matrix(results / "models" / model / "best.pt")
        rows = sampled_logit_rows(results / "logits" / f"{model}.parquet", config["tbat"]["positions"], config["seed"])
        methods = config["decoding"]["methods"]
    job = pq.read_table(results / "tbat" / f"{model}.parquet").to_pandas()
    job = job[job["method"].isin(methods)]  # TBAT after BA (the job's BA rows) is tests/test_workflow.py's
    now, before = BATSolver(W), single_module.BATSolver(W)
    compared = 0
    for decoding in decodings_from_config({**config["decoding"], "methods": methods}):
        probs = np.exp(decoding(rows.logprobs.astype(np.float64)))
        probs /= probs.sum(1, keepdims=True)
        tbat = job[job["method"] == decoding.method]["tbat"].to_numpy()
        for p, expected in zip(probs, tbat, strict=True):
            result, single = now.reject_set(p), before.reject_set(p)
            assert not result.failed and np.array_equal(result.rejected, single.rejected)
            assert (result.lp_solves, result.stats) == (single.lp_solves, single.stats)
            assert result.tbat(p) == pytest.approx(expected, abs=1e-12)
            compared += 1
    assert compared == len(job) > 0
