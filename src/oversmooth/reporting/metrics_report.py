"""Tables 4.1, 4.2, 6.1, E.1-E.6, F.1 from the oversmoothing metrics, and the data Figures 4.1-4.3 draw.

Every table is a pivot of one long summary (model, ground_truth, method, metric, mean, sd, ci_low,
ci_high, n_positions, n_prompts, n_infinite) built from the per-pair summaries of the metrics rule.
Numeric columns are named `<METRIC> <stat> (<ground truth>)` or `<Method> <stat>`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from oversmooth.core.catalog import TOKEN_REFERENCE, bottleneck_of
from oversmooth.core.io import read_parquet
from oversmooth.core.labels import METHOD_LABELS, METRIC_LABELS
from oversmooth.extraction.logit_tables import iter_logits

STATS = ("mean", "sd", "ci_low", "ci_high")
OVERSMOOTHING_ROWS = ("tto", "nsmd", "tv", "kl", "kl_eps")


def load_summaries(paths: Mapping[tuple[str, str], str | os.PathLike]) -> pd.DataFrame:
    """One long frame from the per-(model, ground truth) summary CSVs."""
    frames = [pd.read_csv(path).assign(model=model, ground_truth=gt) for (model, gt), path in paths.items()]
    return pd.concat(frames, ignore_index=True)


def _stat_columns(metric: str) -> list[str]:
    return [*STATS, "n_infinite"] if metric == "kl" else list(STATS)


def by_ground_truth(summary: pd.DataFrame, models: Sequence[str], metrics: Sequence[str], method: str = "pure") -> pd.DataFrame:
    """One row per model; for each ground truth and metric its mean, sd and CI (Tables 4.1, 4.2, F.1)."""
    picked = summary[(summary["method"] == method) & summary["metric"].isin(metrics)]
    table = pd.DataFrame({"bottleneck": [bottleneck_of(m) for m in models], "model": list(models)})
    for gt in picked["ground_truth"].unique():
        for metric in metrics:
            rows = picked[(picked["ground_truth"] == gt) & (picked["metric"] == metric)].set_index("model")
            for stat in _stat_columns(metric):
                table[f"{METRIC_LABELS[metric]} {stat} ({gt})"] = table["model"].map(rows[stat])
    first = picked[picked["metric"] == metrics[0]].set_index(["model"]).groupby(level=0)["n_positions"].first()
    table["positions"] = table["model"].map(first)
    return table


def load_tbat_summaries(paths: Mapping[str, str | os.PathLike]) -> pd.DataFrame:
    """One long frame from the per-model TBAT summary CSVs."""
    return pd.concat([pd.read_csv(path).assign(model=model) for model, path in paths.items()], ignore_index=True)


def table_4_1(summary: pd.DataFrame, models: Sequence[str], tbat: pd.DataFrame | None) -> pd.DataFrame:
    """TTO and NSMD per bottleneck against each ground truth (pure sampling), and TBAT (pure) when given."""
    table = by_ground_truth(summary, models, ["tto", "nsmd"])
    if tbat is None:
        return table
    pure = tbat[tbat["method"] == "pure"].set_index("model")
    for stat in (*STATS, "n_failed", "n_positions"):
        table[f"TBAT {stat}"] = table["model"].map(pure[stat])
    return table


def table_4_2(summary: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """TV and KL (with its count of infinite positions, and KL_eps) per bottleneck against each ground truth."""
    return by_ground_truth(summary, models, ["tv", "kl", "kl_eps"])


def table_7_1(summary: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """TTO and NSMD of the SVD-imposed heads `svd-r<r>` against each ground truth, pure sampling (Table 7.1)."""
    return by_ground_truth(summary, models, ["tto", "nsmd"])


table_7_2 = table_4_2  # TV and KL of the SVD-imposed heads (Table 7.2): Table 4.2's view of other models


def table_f_1(summary: pd.DataFrame, models: Sequence[str]) -> pd.DataFrame:
    """Entropy difference H(p_bn) - H(p_gt) per ground truth, and the average of the means."""
    table = by_ground_truth(summary, models, ["entropy_diff"])
    means = [c for c in table.columns if c.startswith("Entropy difference mean")]
    table["average mean"] = table[means].mean(axis=1)
    return table


def by_method(summary: pd.DataFrame, models: Sequence[str], methods: Sequence[str], stats: Sequence[str]) -> pd.DataFrame:
    """Rows (bottleneck, metric), columns `<Method> <stat>` (the appendix E and Table 6.1 layout), for the methods the
    summary has for some row (a method measured for some models only, BA's for the one-matrix heads, leaves the
    others' cells blank); where a method was measured at other positions than the first (BA's), `positions` and
    `<Method> positions` give each count."""
    summary = summary[summary["model"].isin(models)]
    shown = [m for m in methods if (summary["method"] == m).any()]
    counts = measured_positions(summary, "model")
    rows = []
    for model in models:
        for metric in OVERSMOOTHING_ROWS:
            row = {"bottleneck": bottleneck_of(model), "model": model, "metric": METRIC_LABELS[metric]}
            for method in shown:
                cell = summary[(summary["model"] == model) & (summary["metric"] == metric) & (summary["method"] == method)]
                for stat in stats:
                    combine = cell[stat].sum() if stat == "n_infinite" else cell[stat].mean()
                    row[f"{METHOD_LABELS[method]} {stat}"] = combine if len(cell) else np.nan
            rows.append(row)
    return _with_positions(pd.DataFrame(rows), counts, shown)


def measured_positions(summary: pd.DataFrame, key: str) -> pd.DataFrame:
    """Positions measured per row `key` (model) and method: counted where a value was finite or not (`n_positions`
    and `n_infinite`, or TBAT's `n_failed`), the most over ground truths; a frame indexed by `key`, a column per
    method."""
    missing = "n_infinite" if "n_infinite" in summary else "n_failed"
    frame = summary.assign(_n=summary["n_positions"] + summary[missing].fillna(0))
    if "metric" in frame and "tto" in set(frame["metric"]):
        frame = frame[frame["metric"] == "tto"]  # finite wherever measured: one count per (model, gt, method)
    return frame.groupby([key, "method"])["_n"].max().unstack("method")


def _with_positions(table: pd.DataFrame, counts: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """`table` with `positions` (the first method's count per row) and `<Method> positions` for each method measured
    at other positions for some row; unchanged where every method has the same."""
    if not methods or table.empty:
        return table
    counts = counts.reindex(index=table["model"].unique(), columns=list(methods))
    first = counts[methods[0]]
    differing = [m for m in methods[1:] if not counts[m].dropna().eq(first[counts[m].notna()]).all()]
    if not differing:
        return table
    table["positions"] = table["model"].map(first)
    for method in differing:
        table[f"{METHOD_LABELS[method]} positions"] = table["model"].map(counts[method])
    return table


def table_6_1(summary: pd.DataFrame, models: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """Each metric per bottleneck and decoding method, the means averaged over ground truths."""
    return by_method(summary, models, methods, ["mean"])


def table_e_tbat(tbat: pd.DataFrame, models: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """TBAT per bottleneck and method: mean, sd, CI, solver failures (thesis E.7, E.8, and the truncation samplers'
    table); tok-full's bottleneck is `full`. Methods and positions as `by_method`."""
    tbat = tbat[tbat["model"].isin(models)]
    shown = [m for m in methods if (tbat["method"] == m).any()]
    rows = []
    for model in models:
        row = {"bottleneck": "full" if model == TOKEN_REFERENCE else bottleneck_of(model), "model": model}
        for method in shown:
            cell = tbat[(tbat["model"] == model) & (tbat["method"] == method)]
            for stat in (*STATS, "n_failed"):
                row[f"{METHOD_LABELS[method]} {stat}"] = cell[stat].iloc[0] if len(cell) else np.nan
        rows.append(row)
    return _with_positions(pd.DataFrame(rows), measured_positions(tbat, "model"), shown)


def table_e(summary: pd.DataFrame, models: Sequence[str], ground_truth: str, methods: Sequence[str]) -> pd.DataFrame:
    """One ground truth, the given methods: mean, sd, CI and infinite count per metric and bottleneck (thesis E.1-E.6,
    and the truncation samplers' `table_truncation_<ground truth>`)."""
    return by_method(summary[summary["ground_truth"] == ground_truth], models, methods, [*STATS, "n_infinite"])


# ----------------------------------------------------------------------------------------------
# The data of Figure 4.2 (drawn in `figures`; Figures 4.3 and 5.1's byte frequencies: `frequencies`)


def per_byte_mean(metric_frames: Mapping[str, pd.DataFrame], metric: str) -> pd.DataFrame:
    """Mean `metric` per target byte for each model, and each byte's count (Figure 4.2's data)."""
    counts = next(iter(metric_frames.values())).groupby("target").size().rename("count")
    means = pd.DataFrame({name: frame.groupby("target")[metric].mean() for name, frame in metric_frames.items()})
    return means.join(counts).sort_values("count", ascending=False, kind="stable")


# ----------------------------------------------------------------------------------------------
# Figure data from the pipeline's files


def position_view(
    prompts_path: str | os.PathLike,
    logits_paths: Mapping[str, str | os.PathLike],
    ground_truths: Sequence[str],
    prompt: int,
    position: int | None,
    tau: float,
    kl_epsilon: float,
) -> tuple[dict[str, np.ndarray], int, dict[str, str], str]:
    """Figure 4.1's data: each model's distribution at one position, the target, panel titles with
    the metrics (means over ground truths, as the thesis) and the text the models saw."""
    from oversmooth.analysis.metrics import oversmoothing

    prompts = read_parquet(prompts_path, filters=[("prompt_id", "=", prompt)]).to_pylist()
    if not prompts:
        raise ValueError(f"figures.prompt: no prompt_id {prompt} in {prompts_path}")
    row = prompts[0]
    position = len(row["window"]) - 1 if position is None else position
    if position >= len(row["window"]):
        raise ValueError(f"figures.position: {position} is outside the window of {len(row['window'])} bytes")
    logprobs = {}
    for name, path in logits_paths.items():
        hit = read_parquet(path, filters=[("prompt_id", "=", prompt), ("position", "=", position)])
        logprobs[name] = np.asarray(hit.column("logprobs")[0].as_py(), dtype=np.float64)
    target = row["window"][position]
    titles = {}
    for name, lp in logprobs.items():
        head = f"{name}: p(correct) {np.exp(lp[target]):.3f}"
        if name in ground_truths:
            titles[name] = head + " (ground truth)"
            continue
        values = [oversmoothing(lp[None], logprobs[gt][None], tau, kl_epsilon) for gt in ground_truths]
        mean = {k: float(np.mean([v[k].item() for v in values])) for k in ("tto", "nsmd", "tv", "kl")}
        titles[name] = head + "\nTTO {tto:.3f} · NSMD {nsmd:.3f} · TV {tv:.3f} · KL {kl:.3f}".format(**mean)
    text = (row["context"] + row["window"][:position]).decode("utf-8", errors="replace")
    return {k: np.exp(v) for k, v in logprobs.items()}, int(target), titles, text


def read_position_metrics(path: str | os.PathLike, method: str = "pure", columns: Sequence[str] = ("target", "nsmd")) -> pd.DataFrame:
    return read_parquet(path, columns=list(columns), filters=[("method", "=", method)]).to_pandas()


def argmax_counts(logits_path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """How often each byte is the model's argmax, and how often it is the target, streaming the file."""
    argmax, targets = np.zeros(256, np.int64), np.zeros(256, np.int64)
    for batch in iter_logits(logits_path):
        argmax += np.bincount(batch.logprobs.argmax(1), minlength=256)
        targets += np.bincount(batch.target, minlength=256)
    return argmax, targets
