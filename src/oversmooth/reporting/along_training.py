"""Oversmoothing along training (thesis ch. 8, future work): the bottlenecked family at its checkpoints
`bn-<k>@<iteration>` and at its best weights `bn-<k>`, against validation loss, and the family compared at matched
validation loss: at equal loss, does a narrower bottleneck still oversmooth more?

The validation loss of every point is the training run's own estimate at that iteration (`train_log.csv`: the same
`eval_iters` batches of the validation shard at every evaluation), so the points of one run and of different runs
are measured alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from oversmooth.core.catalog import bottleneck_of, checkpoint_parts
from oversmooth.core.labels import METRIC_LABELS
from oversmooth.reporting.metrics_report import load_summaries, load_tbat_summaries

TRAJECTORY_METRICS = ("tto", "nsmd")
TBAT = "tbat"


def training_points(train_logs: Mapping[str, pd.DataFrame], best_iterations: Mapping[str, int],
                    points: Sequence[str]) -> pd.DataFrame:
    """Per point (a checkpoint `bn-<k>@<it>` or a final `bn-<k>`, whose iteration is its best one): bottleneck,
    iteration, validation loss and the head's singular-entropy gap (Godey et al.) from its run's training log."""
    rows = []
    for point in points:
        model, iteration = checkpoint_parts(point)
        iteration = best_iterations[model] if iteration is None else iteration
        log = train_logs[model].set_index("iteration")
        if iteration not in log.index:
            raise KeyError(f"{point}: the training log of {model} has no evaluation at iteration {iteration}")
        rows.append({
            "point": point, "model": model, "bottleneck": bottleneck_of(model), "iteration": iteration,
            "final": point == model, "val_loss": float(log.loc[iteration, "val_loss"]),
            "singular_entropy_gap": float(log.loc[iteration, "head_singular_entropy_gap"]),
        })
    return pd.DataFrame(rows)


def trajectory(points: pd.DataFrame, summary: pd.DataFrame, tbat: pd.DataFrame) -> pd.DataFrame:
    """Long frame: every point's TTO and NSMD against each ground truth and its TBAT (ground truth ""), per decoding
    method, with the point's iteration and validation loss. `summary`/`tbat` are the long frames of
    `load_summaries`/`load_tbat_summaries`, their `model` column naming the point."""
    metrics = summary[summary["metric"].isin(TRAJECTORY_METRICS)]
    frames = [metrics[["model", "ground_truth", "method", "metric", "mean", "ci_low", "ci_high"]],
              tbat.assign(ground_truth="")[["model", "ground_truth", "method", "metric", "mean", "ci_low", "ci_high"]]]
    long = pd.concat([f for f in frames if len(f)], ignore_index=True).rename(columns={"model": "point"})
    return points.merge(long, on="point", how="inner", validate="one_to_many")


def load_trajectory(models: Sequence[str], logs: Sequence[str | os.PathLike], configs: Sequence[str | os.PathLike],
                    points: Sequence[str], pairs: Sequence[tuple[str, str]], summaries: Sequence[str | os.PathLike],
                    tbat: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """`trajectory` from a run's files: each bottleneck's training log and summary (`models`, `logs`, `configs`),
    and each point's metrics summaries (one per (point, ground truth) of `pairs`) and TBAT summary (one per point)."""
    train_logs = {m: pd.read_csv(path) for m, path in zip(models, logs, strict=True)}
    best = {m: json.loads(Path(path).read_text())["best_iteration"] for m, path in zip(models, configs, strict=True)}
    summary = load_summaries(dict(zip(map(tuple, pairs), summaries, strict=True)))
    return trajectory(training_points(train_logs, best, points), summary,
                      load_tbat_summaries(dict(zip(points, tbat, strict=True))))


def loss_levels(trajectory: pd.DataFrame, n_levels: int) -> np.ndarray:
    """`n_levels` validation losses evenly spaced between the lowest and the highest loss that two or more
    bottlenecks pass through (each run spans the losses between its lowest and highest point); empty if none."""
    spans = trajectory.groupby("bottleneck")["val_loss"].agg(["min", "max"]).to_numpy()
    edges = np.unique(spans)
    shared = [x for x in edges if ((spans[:, 0] <= x) & (x <= spans[:, 1])).sum() >= 2]
    if not shared:
        return np.array([])
    low, high = min(shared), max(shared)
    return np.linspace(low, high, n_levels) if n_levels > 1 else np.array([(low + high) / 2])


def at_loss(points: pd.DataFrame, levels: np.ndarray, column: str = "mean") -> np.ndarray:
    """One run's metric (its `column`) at each validation loss, linear in loss between the two points that bracket
    it (points ordered by loss); NaN outside the losses the run passed through."""
    ordered = points.sort_values("val_loss")
    x, y = ordered["val_loss"].to_numpy(), ordered[column].to_numpy()
    inside = (levels >= x[0]) & (levels <= x[-1])
    return np.where(inside, np.interp(levels, x, y), np.nan)


def loss_matched_table(trajectory: pd.DataFrame, n_levels: int) -> pd.DataFrame:
    """Per ground truth, decoding method, metric and matched validation loss: each bottleneck's metric there (a
    column `bn-<k>` each), Spearman's rank correlation between k and the metric over the bottlenecks that reach
    that loss (negative: the narrower, the more oversmoothing, at equal loss), and each bottleneck's interval there
    (`bn-<k> ci_low`, `bn-<k> ci_high`: the bounds of its points' bootstrap intervals, interpolated like the means)."""
    models = sorted(trajectory["model"].unique(), key=bottleneck_of)
    bounds = [f"{m} {stat}" for m in models for stat in ("ci_low", "ci_high")]
    rows = []
    for (gt, method, metric), group in trajectory.groupby(["ground_truth", "method", "metric"], sort=False):
        levels = loss_levels(group, n_levels)
        runs = {m: group[group["model"] == m] for m in models if (group["model"] == m).any()}
        values = {m: at_loss(run, levels) for m, run in runs.items()}
        intervals = {f"{m} {stat}": at_loss(run, levels, stat)
                     for m, run in runs.items() for stat in ("ci_low", "ci_high")}
        for i, level in enumerate(levels):
            row = {"ground_truth": gt or "-", "method": method, "metric": METRIC_LABELS.get(metric, metric.upper()),
                   "val_loss": level, **{m: v[i] for m, v in values.items()}}
            reached = {bottleneck_of(m): v[i] for m, v in values.items() if np.isfinite(v[i])}
            row["n_bottlenecks"] = len(reached)
            row["spearman_k"] = _spearman(list(reached), list(reached.values()))
            rows.append(row | {name: v[i] for name, v in intervals.items()})
    return pd.DataFrame(rows).reindex(columns=["ground_truth", "method", "metric", "val_loss", *models,
                                               "n_bottlenecks", "spearman_k", *bounds])


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho (Pearson correlation of average ranks); NaN for fewer than three pairs or a constant side."""
    if len(x) < 3:
        return float("nan")
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])
