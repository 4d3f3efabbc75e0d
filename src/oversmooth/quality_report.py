"""Tables 5.1-5.3, 6.2, 6.3, the samples of appendix G, Figure 5.1 (thesis ch. 5, §6.2), and the token track's
sample quality against the rank of its heads."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

from oversmooth.catalog import TOKEN_REFERENCE, token_head_parts
from oversmooth.decoding import METHOD_LABELS
from oversmooth.io import atomic_path
from oversmooth.metrics_report import frequency_figure, relative_frequencies
from oversmooth.quality import byte_histogram
from oversmooth.report import plt

QUALITY_TABLES = {
    "table_5_3": ("pure",),
    "table_6_2": ("pure", "greedy", "temperature"),
    "table_6_3": ("top_k", "top_p"),
}
SAMPLE_TABLES = {
    "table_5_1": ("pure", "greedy"),
    "table_5_2": ("top_k", "top_p"),
    "samples_appendix_g": ("pure", "greedy", "top_k", "top_p", "temperature"),
}
SAMPLE_TITLES = {
    "table_5_1": "Table 5.1: continuations with pure and greedy decoding",
    "table_5_2": "Table 5.2: continuations with top-k and top-p decoding",
    "samples_appendix_g": "Appendix G: continuations of every model with every decoding method",
}


def quality_table(summaries: Mapping[str, pd.DataFrame], models: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """One row per model and method (config order), then the Human row."""
    frames = []
    for model in [*models, "human"]:
        frame = summaries[model]
        frames.append(frame if model == "human" else frame[frame["method"].isin(methods)])
    table = pd.concat(frames, ignore_index=True)
    order = {m: i for i, m in enumerate(methods)}
    table["_model"] = table["model"].map({m: i for i, m in enumerate([*models, "human"])})
    table["_method"] = table["method"].map(order).fillna(len(order))
    table = table.sort_values(["_model", "_method"], kind="stable").drop(columns=["_model", "_method"])
    table.insert(0, "model", table.pop("model"))
    table["method"] = table["method"].map(lambda m: METHOD_LABELS.get(m, "Human" if m == "human" else m))
    return table.reset_index(drop=True)


def nearest_models(models: Sequence[str], wanted: Sequence[int] = (4, 8, 32)) -> list[str]:
    """The bottlenecked models nearest to k = 4, 8, 32 (the thesis's Tables 5.1, 5.2), without repeats."""
    ks = {int(m.removeprefix("bn-")): m for m in models if m.startswith("bn-")}
    chosen = [ks[min(ks, key=lambda k: (abs(k - w), k))] for w in wanted]
    return list(dict.fromkeys(chosen))


def samples_markdown(
    samples: pd.DataFrame, human: pd.DataFrame, models: Sequence[str], methods: Sequence[str], prompt_id: int, title: str
) -> str:
    """A markdown table of one prompt's continuations per model and method, the prefix in bold."""
    human_row = human[human["prompt_id"] == prompt_id]
    if human_row.empty:
        raise ValueError(f"figures.sample_prompt: prompt {prompt_id} was not sampled (see sampling.n_prompts)")
    prefix = _md(human_row["prefix"].iloc[0].decode("utf-8", errors="replace"))
    lines = [f"# {title}", "", f"Prompt {prompt_id}; the prefix given to the models is in bold.", "",
             "| model | method | continuation |", "|---|---|---|"]
    lines.append(f"| Human | — | **{prefix}**{_md(human_row['text'].iloc[0])} |")
    for model in models:
        for method in methods:
            row = samples[(samples["model"] == model) & (samples["method"] == method) & (samples["prompt_id"] == prompt_id)]
            if len(row):
                lines.append(f"| {model} | {METHOD_LABELS[method]} | **{prefix}**{_md(row['text'].iloc[0])} |")
    return "\n".join(lines) + "\n"


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def figure_5_1(samples: Mapping[str, pd.DataFrame], human: pd.DataFrame, method: str = "pure"):
    """Byte frequencies of each model's samples against the human continuations."""
    counts = {m: byte_histogram(f[f["method"] == method]["continuation"].tolist()) for m, f in samples.items()}
    reference = byte_histogram(human["continuation"].tolist())
    return frequency_figure(
        relative_frequencies(counts, "human", reference),
        f"Figure 5.1: byte frequencies of the models' samples ({METHOD_LABELS[method]}) against human text",
        "human byte",
    )


def _md(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("\r", " ").replace("\n", " ⏎ ")


TOKEN_QUALITY_PANELS = {  # summary column -> (label, its CI columns, or None)
    "mauve_mean": ("MAUVE against human text", ("mauve_ci_low", "mauve_ci_high")),
    "bits_per_byte_mean": ("bits per byte under the judge", ("bits_per_byte_ci_low", "bits_per_byte_ci_high")),
    "valid_word_ratio_mean": ("valid-word ratio", ("valid_word_ratio_ci_low", "valid_word_ratio_ci_high")),
    "repetition": ("share of samples repeating a word n-gram", ("repetition_ci_low", "repetition_ci_high")),
}


def figure_token_quality(summary: pd.DataFrame, human: pd.DataFrame) -> plt.Figure:
    """The token track's sample quality against the rank k of its heads: one line per decoding method and kind of
    head (SVD solid, learned dashed) with bootstrap CIs, the full head per method as a dotted line, and human text
    (black) where the metric has a human value."""
    heads = summary[summary["model"] != TOKEN_REFERENCE].copy()
    heads[["kind", "k"]] = [token_head_parts(m) for m in heads["model"]]
    full = summary[summary["model"] == TOKEN_REFERENCE]
    methods = list(dict.fromkeys(summary["method"]))
    colors = dict(zip(methods, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(TOKEN_QUALITY_PANELS), figsize=(3.6 * len(TOKEN_QUALITY_PANELS), 3.4), squeeze=False)
    for ax, (column, (label, (low, high))) in zip(axes[0], TOKEN_QUALITY_PANELS.items()):
        for (method, kind), group in heads.groupby(["method", "kind"], sort=False):
            group = group.sort_values("k")
            ax.plot(group["k"], group[column], marker="o", color=colors[method],
                    linestyle="-" if kind == "svd" else "--", label=f"{METHOD_LABELS[method]}, {kind} head")
            # the interval as drawn, not as offsets from the mean: a bootstrap interval need not contain it
            ax.vlines(group["k"], group[low], group[high], color=colors[method], linewidth=1)
        for _, row in full.iterrows():
            ax.axhline(row[column], color=colors[row["method"]], linestyle=":", linewidth=1)
        if column in human and human[column].notna().any():
            ax.axhline(float(human[column].iloc[0]), color="black", linewidth=1, label="human text")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rank k of the head")
        ax.set_title(label, fontsize=9)
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("Token track: sample quality of rank-k heads (dotted: the full head; black: human text; "
                 "bootstrap CIs)", fontsize=9)
    fig.tight_layout()
    return fig
