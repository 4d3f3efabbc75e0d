"""Seconds per position of each oversmoothing metric and of TBAT: ours beside the plain definitions
(thesis Table I.1). Shared by `rule time_metrics` and `benchmarks/metrics_speed.py`."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pandas as pd

from oversmooth.analysis import reference
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.bat.solver import BATSolver
from oversmooth.analysis.decoding import nucleus_mask
from oversmooth.analysis.metrics import (
    entropy,
    kl_divergence,
    nucleus_set_mass_difference,
    tail_token_overassignment,
    total_variation,
)
from oversmooth.extraction.logit_tables import ROW_GROUP_ROWS

TIMED = ("TTO", "NSMD", "TV", "KL", "TBAT")


def vectorised(tau: float) -> dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """Each metric from (n, V) log-probabilities, as the pipeline computes it (exp and nucleus included)."""

    def with_nucleus(metric):
        def run(logp_bn, logp_gt):
            p_bn, p_gt = np.exp(logp_bn), np.exp(logp_gt)
            return metric(p_bn, p_gt, nucleus_mask(p_gt, tau))

        return run

    return {
        "TTO": with_nucleus(tail_token_overassignment),
        "NSMD": with_nucleus(nucleus_set_mass_difference),
        "TV": lambda a, b: total_variation(np.exp(a), np.exp(b)),
        "KL": lambda a, b: kl_divergence(b, a),
        "entropy diff": lambda a, b: entropy(a) - entropy(b),
    }


def per_position(tau: float) -> dict[str, Callable[[list, list], float]]:
    """The same metrics, one position at a time, from probability lists (`oversmooth.analysis.reference`)."""
    return {
        "TTO": lambda p, q: reference.tto(p, q, tau),
        "NSMD": lambda p, q: reference.nsmd(p, q, tau),
        "TV": reference.tv,
        "KL": reference.kl,
        "entropy diff": reference.entropy_diff,
    }


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def time_vectorised(fn, logp_bn: np.ndarray, logp_gt: np.ndarray, repeats: int) -> np.ndarray:
    """Seconds per position of `fn` over row groups of positions, once per repeat."""
    chunks = [(logp_bn[i : i + ROW_GROUP_ROWS], logp_gt[i : i + ROW_GROUP_ROWS]) for i in range(0, len(logp_bn), ROW_GROUP_ROWS)]
    fn(*chunks[0])  # warm-up
    return np.array([seconds(lambda: [fn(a, b) for a, b in chunks]) / len(logp_bn) for _ in range(repeats)])


def model_timings(
    W: np.ndarray,
    logp_bn: np.ndarray,
    logp_gt: np.ndarray,
    *,
    tau: float,
    tbat: TBATSettings,
    reference_positions: int,
    tbat_reference_positions: int,
    repeats: int = 5,
) -> pd.DataFrame:
    """Per metric: mean and sd of seconds per position, ours and the reference, on the same positions."""
    logp_bn, logp_gt = logp_bn.astype(np.float64), logp_gt.astype(np.float64)
    p_bn, p_gt = np.exp(logp_bn), np.exp(logp_gt)
    p_bn /= p_bn.sum(1, keepdims=True)
    rows = []
    ours, ref = vectorised(tau), per_position(tau)
    m = min(reference_positions, len(p_bn))
    bn_lists, gt_lists = p_bn[:m].tolist(), p_gt[:m].tolist()
    for name in TIMED[:4]:
        fast = time_vectorised(ours[name], logp_bn, logp_gt, repeats)
        slow = np.array([seconds(lambda a=a, b=b, fn=ref[name]: fn(a, b)) for a, b in zip(bn_lists, gt_lists)])
        rows.append(_row(name, fast, slow))
    solver = BATSolver(W, tbat)
    solver.reject_set(p_bn[0])  # warm-up
    fast = np.array([seconds(lambda p=p: solver.reject_set(p)) for p in p_bn])
    n = min(tbat_reference_positions, len(p_bn))
    slow = np.array(
        [seconds(lambda p=p: reference.bat_reject_set(p, W, tbat.threshold, tbat.zero_tol, True, tbat.feasibility_tol)) for p in p_bn[:n]]
    )
    rows.append(_row("TBAT", fast, slow))
    return pd.DataFrame(rows)


def _row(metric: str, ours: np.ndarray, ref: np.ndarray) -> dict:
    return {
        "metric": metric,
        "ours_mean_s": ours.mean(), "ours_sd_s": ours.std(ddof=1) if len(ours) > 1 else np.nan, "ours_n": len(ours),
        "reference_mean_s": ref.mean() if len(ref) else np.nan,
        "reference_sd_s": ref.std(ddof=1) if len(ref) > 1 else np.nan, "reference_n": len(ref),
        "ratio": ref.mean() / ours.mean() if len(ref) else np.nan,
    }


def table_i_1(timings: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per bottleneck; per metric ours (mean, sd), the reference (mean, sd) and the ratio."""
    from oversmooth.core.catalog import bottleneck_of

    records = []
    for model, frame in timings.items():
        record = {"bottleneck": bottleneck_of(model), "model": model}
        for row in frame.itertuples():
            record.update({
                f"{row.metric} ours mean s": row.ours_mean_s, f"{row.metric} ours sd s": row.ours_sd_s,
                f"{row.metric} reference mean s": row.reference_mean_s, f"{row.metric} reference sd s": row.reference_sd_s,
                f"{row.metric} ratio": row.ratio,
            })
        records.append(record)
    return pd.DataFrame(records)
