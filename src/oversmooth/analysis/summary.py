"""Summaries of per-position values: mean, sd and a cluster-bootstrap confidence interval per decoding method.

Apart from the metrics' formulas (`metrics`) so that the jobs that only summarise (TBAT, sample quality) do not
rerun when a formula changes (README, "What counts").
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd

from oversmooth.core.io import read_parquet

SUMMARY_COLUMNS = ["method", "metric", "mean", "sd", "ci_low", "ci_high", "n_positions", "n_prompts", "n_infinite"]


def summarise(
    frame: pd.DataFrame, *, n_boot: int, confidence: float, seed: int, metrics: Sequence[str]
) -> pd.DataFrame:
    """Mean, sd and a cluster-bootstrap CI of every metric per decoding method.

    Positions of one window are not independent, so the bootstrap resamples prompts (with all their
    positions), `n_boot` times, seeded; the CI is the percentile interval. Non-finite values (infinite
    KL, NaN for a TBAT solver failure) are left out of mean, sd and CI and counted in `n_infinite`.
    """
    rows = []
    for method, group in frame.groupby("method", sort=False):
        prompt_codes, prompts = pd.factorize(group["prompt_id"])
        weights = bootstrap_weights(len(prompts), n_boot, seed)
        for metric in metrics:
            values = group[metric].to_numpy()
            rows.append({"method": method, "metric": metric, **describe(values, prompt_codes, weights, confidence)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def bootstrap_weights(n_clusters: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_clusters) counts: how often each cluster is drawn in each bootstrap replicate."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot)


def describe(values: np.ndarray, clusters: np.ndarray, weights: np.ndarray, confidence: float) -> dict:
    """Mean, sample sd and the percentile CI of the mean over the finite values, resampling clusters."""
    finite = np.isfinite(values)
    n_clusters = weights.shape[1]
    sums = np.bincount(clusters[finite], weights=values[finite], minlength=n_clusters)
    counts = np.bincount(clusters[finite], minlength=n_clusters).astype(float)
    kept = values[finite]
    mean = kept.mean() if kept.size else (np.inf if np.isposinf(values).any() else np.nan)  # all infinite: so is the mean
    sd = kept.std(ddof=1) if kept.size > 1 else np.nan
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (weights @ sums) / (weights @ counts)
    low, high = percentile_interval(boot[np.isfinite(boot)], confidence)
    return {
        "mean": mean, "sd": sd, "ci_low": low, "ci_high": high,
        "n_positions": int(finite.sum()), "n_prompts": int(n_clusters), "n_infinite": int((~finite).sum()),
    }


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    """The bootstrap percentile interval of a statistic's replicates; NaNs when there are none."""
    if not replicates.size:
        return np.nan, np.nan
    alpha = (1 - confidence) / 2
    low, high = np.quantile(replicates, [alpha, 1 - alpha])
    return float(low), float(high)


def summarise_file(
    path: str | os.PathLike, *, n_boot: int, confidence: float, seed: int, metrics: Sequence[str]
) -> pd.DataFrame:
    frame = read_parquet(path, columns=["prompt_id", "method", *metrics]).to_pandas()
    return summarise(frame, n_boot=n_boot, confidence=confidence, seed=seed, metrics=metrics)
