"""Across-seed summaries: every table with a row per bottlenecked model gains, for each k trained under several
seeds (`bn-<k>` and its seed runs `bn-<k>-s<seed>`), a row of the across-seed mean and a row of the across-seed
standard deviation of each of its numbers.

Where a table carries a statistic with a confidence interval (columns `<x> mean`, `<x> ci_low`, `<x> ci_high`,
or `<x>_mean`, ...), the mean row's interval combines the two sources of variance (Bouthillier et al. 2021,
"Accounting for Variance in Machine Learning Benchmarks", MLSys, argue that both must be counted): the training
seed, as the between-run variance of the mean, s^2 / n, and the evaluation sample, as each run's bootstrap standard
error (CI half-width / 1.96) squared, averaged over runs. All runs read the same prompts, so that second part is
shared by the runs and does not shrink with n. The interval is mean +- t * se with Satterthwaite's (1946) degrees
of freedom: n - 1 when the seeds dominate, the normal quantile when the prompts do.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import special  # scipy.stats' t and normal quantiles, without its ~1 s import in every table job

from oversmooth.core.catalog import seed_parts
from oversmooth.core.io import write_csv

ROW_KEYS = ("ground_truth", "method", "metric", "layer", "representation")  # columns that name a row with the model
Z_95 = special.ndtri(0.975)  # stats.norm.ppf(0.975)


def seed_row_label(model: str, n_runs: int, statistic: str) -> str:
    return f"{model} ({n_runs} seeds: {statistic})"


def without_seed_rows(table: pd.DataFrame) -> pd.DataFrame:
    """A written table's rows of single runs: its across-seed mean and sd rows (`seed_row_label`) left out."""
    return table[~table["model"].astype(str).str.fullmatch(r".+ \(\d+ seeds: (mean|sd)\)")].reset_index(drop=True)


def combined_interval(means: np.ndarray, ci_low: np.ndarray, ci_high: np.ndarray,
                      level: float = 0.95) -> tuple[float, float]:
    """The interval of the across-seed mean of `means` (one per run, each with its own bootstrap interval):
    se^2 = var(means) / n + mean(((ci_high - ci_low) / (2 z))^2), t quantile at Satterthwaite's df."""
    n = len(means)
    between = float(np.var(means, ddof=1)) / n if n > 1 else 0.0
    within = float(np.mean(((np.asarray(ci_high) - np.asarray(ci_low)) / (2 * Z_95)) ** 2))
    se = np.sqrt(between + within)
    df = se**4 / (between**2 / (n - 1)) if between > 0 else np.inf
    half = float(special.stdtrit(df, 0.5 + level / 2)) * se  # stats.t.ppf(0.5 + level / 2, df); df inf: normal
    centre = float(np.mean(means))
    return centre - half, centre + half


def _interval_columns(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """`{mean column: (ci_low column, ci_high column)}` for every statistic the table gives with an interval."""
    found = {}
    for column in columns:
        if "ci_low" in column:
            mean, high = column.replace("ci_low", "mean"), column.replace("ci_low", "ci_high")
            if mean in columns and high in columns:
                found[mean] = (column, high)
    return found


def _seed_rows(runs: pd.DataFrame, base: str, numeric: Sequence[str]) -> list[dict]:
    """The mean and sd rows of one bottleneck's runs (one row each, sharing the key columns)."""
    intervals = _interval_columns(list(runs.columns))
    bounds = {c for pair in intervals.values() for c in pair}
    constant = {c: runs[c].iloc[0] for c in runs.columns if runs[c].nunique(dropna=False) == 1}
    mean_row = {**constant, "model": seed_row_label(base, len(runs), "mean")}
    sd_row = {**constant, "model": seed_row_label(base, len(runs), "sd")}
    for column in numeric:
        values = runs[column].to_numpy(dtype=float)
        if column in bounds:
            sd_row[column] = np.nan
            continue
        mean_row[column] = float(np.mean(values))
        sd_row[column] = float(np.std(values, ddof=1))
    for mean, (low, high) in intervals.items():
        mean_row[low], mean_row[high] = combined_interval(runs[mean].to_numpy(float), runs[low].to_numpy(float),
                                                          runs[high].to_numpy(float))
    return [mean_row, sd_row]


def with_seed_rows(table: pd.DataFrame) -> pd.DataFrame:
    """`table` with, after the last run of each bottleneck that has two or more runs (per value of its row-key
    columns `ROW_KEYS`), its across-seed mean and sd rows; unchanged when no bottleneck has two runs."""
    if "model" not in table.columns or table.empty:
        return table
    keys = [c for c in ROW_KEYS if c in table.columns]
    numeric = [c for c in table.select_dtypes("number").columns if c not in keys and c != "bottleneck"]
    table = table.reset_index(drop=True)
    base = table["model"].map(lambda m: seed_parts(m)[0] if isinstance(m, str) else m)
    rows, order = [], []
    for _, runs in table.assign(_base=base).groupby(["_base", *keys], sort=False, dropna=False):
        if runs["model"].nunique() < 2:
            continue
        for i, row in enumerate(_seed_rows(runs.drop(columns="_base"), runs["_base"].iloc[0], numeric)):
            rows.append(row)
            order.append(runs.index.max() + 0.25 * (i + 1))
    if not rows:
        return table
    extra = pd.DataFrame(rows, index=order).reindex(columns=table.columns)
    return pd.concat([table, extra]).sort_index(kind="stable").reset_index(drop=True)


def write_table(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """A final table as CSV, with each bottleneck's across-seed mean and sd rows where it has several runs."""
    write_csv(with_seed_rows(frame), path)
