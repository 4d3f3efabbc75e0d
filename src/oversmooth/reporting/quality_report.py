"""Tables 5.1-5.3, 6.2, 6.3 and the samples of appendix G (thesis ch. 5, §6.2); their figures are in `figures`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import pandas as pd

from oversmooth.core.io import atomic_path
from oversmooth.core.labels import METHOD_LABELS
from oversmooth.data.bytenames import byte_histogram
from oversmooth.reporting.frequencies import relative_frequencies


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


def sample_byte_frequencies(samples: Mapping[str, pd.DataFrame], human: pd.DataFrame, method: str = "pure") -> pd.DataFrame:
    """Figure 5.1's data: the relative byte frequencies of each model's samples under `method`, the human
    continuations' first (`relative_frequencies`)."""
    counts = {m: byte_histogram(f[f["method"] == method]["continuation"].tolist()) for m, f in samples.items()}
    return relative_frequencies(counts, "human", byte_histogram(human["continuation"].tolist()))


def write_text(text: str, path: str | os.PathLike) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def _md(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("\r", " ").replace("\n", " ⏎ ")
