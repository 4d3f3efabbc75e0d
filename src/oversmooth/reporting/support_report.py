"""Support recovery's table: every model's summary (rule support) as one table, a row per model, decoding
method and parameter, and each method's curve of false against lost support read at given lost-support levels
(Finlayson et al. 2024 compare methods at equal lost support). No torch, no plotting."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

REFERENCE = "pure"  # each curve's point at no lost support (oversmooth.analysis.support's reference; not imported:
# the tables and findings do not rerun when the support formulas change)
STATISTICS = ("mean", "ci_low", "ci_high")
SUPPORT_COLUMNS = ("false_support", "lost_support", "inseparable")  # inseparable: pure's rows only


def support_table(summaries: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """model, method, parameter, then `<metric>_<mean|ci_low|ci_high>` for false and lost support and the
    inseparable share (pure's rows), and n_positions and n_prompts: one row per model, method and parameter, in the
    order of `summaries` and of each summary."""
    rows = []
    for model, summary in summaries.items():
        for (method, parameter), group in summary.groupby(["method", "parameter"], sort=False, dropna=False):
            by_metric = group.set_index("metric")
            row = {"model": model, "method": method, "parameter": parameter}
            for metric in SUPPORT_COLUMNS:
                for stat in STATISTICS:
                    row[f"{metric}_{stat}"] = by_metric.loc[metric, stat] if metric in by_metric.index else np.nan
            row["n_positions"] = int(by_metric.loc["false_support", "n_positions"])
            row["n_prompts"] = int(by_metric.loc["false_support", "n_prompts"])
            rows.append(row)
    return pd.DataFrame(rows)


def read_support_table(models: Sequence[str], paths: Sequence[str | os.PathLike]) -> pd.DataFrame:
    """`support_table` of the models' summary files."""
    return support_table({model: pd.read_csv(path) for model, path in zip(models, paths)})


def curve(table: pd.DataFrame, model: str, method: str) -> pd.DataFrame:
    """One method's points for one model and pure's (at no lost support), sorted by lost support; of points at the
    same lost support only the one with the least false support (a value that removes only bytes the truth never
    writes beats pure at no lost support), so that the curve is a function of lost support."""
    rows = table[(table["model"] == model) & (table["method"].isin([method, REFERENCE]))]
    best = rows.sort_values(["lost_support_mean", "false_support_mean"], kind="stable")
    return best.drop_duplicates("lost_support_mean", keep="first").reset_index(drop=True)


def at_lost_support(points: pd.DataFrame, levels: np.ndarray) -> pd.DataFrame:
    """A curve's false support (mean and interval) at each lost-support level, interpolated linearly between its
    points in lost support (the interval's ends interpolated alike; the lost support's own uncertainty is left
    out); NaN outside the curve's range."""
    x = points["lost_support_mean"].to_numpy()
    out = {"lost_support": levels}
    for stat in STATISTICS:
        y = points[f"false_support_{stat}"].to_numpy()
        out[stat] = np.where((levels >= x.min()) & (levels <= x.max()), np.interp(levels, x, y), np.nan)
    return pd.DataFrame(out)


def common_levels(a: pd.DataFrame, b: pd.DataFrame, n: int) -> np.ndarray:
    """n lost-support levels evenly spread over the range both curves cover, its low end left out (at no lost
    support both curves start at pure's point or below it); none where they share no range beyond a point."""
    low = max(a["lost_support_mean"].min(), b["lost_support_mean"].min())
    high = min(a["lost_support_mean"].max(), b["lost_support_mean"].max())
    return np.linspace(low, high, n + 1)[1:] if high > low else np.array([])
