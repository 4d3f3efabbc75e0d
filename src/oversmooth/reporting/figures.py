"""Every figure of the pipeline: Figures 3.1, 4.1-4.3, 5.1, Godey et al.'s singular entropy during training,
anisotropy and rank-constrained heads, oversmoothing along training, and the token track's heads and sample
quality. Plotting only — the numbers they draw come from the table and analysis modules — and the only module that
imports `plotting`, so a plotting edit reruns figure jobs and nothing else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from oversmooth.core.catalog import TOKEN_REFERENCE, token_head_parts
from oversmooth.core.labels import METHOD_LABELS, METRIC_LABELS
from oversmooth.core.plotting import plt, sns
from oversmooth.data.bytenames import byte_name
from oversmooth.reporting.frequencies import relative_frequencies


def training_curves(logs: Mapping[str, pd.DataFrame], panels: Mapping[str, str], ylabel: str, title: str,
                    sharey: bool = True) -> plt.Figure:
    """Columns of the training logs (one panel each, titled by `panels`) against bytes seen, one line per model."""
    rows = [frame.assign(model=name)[["model", "tokens_seen", *panels]] for name, frame in logs.items()]
    long = pd.concat(rows).melt(id_vars=["model", "tokens_seen"], var_name="panel", value_name="value")
    long["panel"] = long["panel"].map(panels)
    grid = sns.relplot(data=long, x="tokens_seen", y="value", hue="model", col="panel", kind="line", height=3.5,
                       aspect=1.2, facet_kws={"sharey": sharey})
    grid.set_axis_labels("bytes seen", ylabel)
    grid.set_titles("{col_name}")
    grid.figure.suptitle(title, y=1.03)
    return grid.figure


def figure_3_1(logs: Mapping[str, pd.DataFrame]) -> plt.Figure:
    """Training and validation loss against bytes seen, one line per model."""
    return training_curves(logs, {"train_loss": "training loss", "val_loss": "validation loss"},
                           "cross-entropy (nats/byte)", "Figure 3.1: training curves per bottleneck")


def figure_godey_singular_entropy(logs: Mapping[str, pd.DataFrame]) -> plt.Figure:
    """Godey et al.'s probe of the head during training, beside the validation loss."""
    panels = {"head_singular_entropy_gap": "head: KL(normalised singular values || uniform)",
              "val_loss": "validation loss (nats/byte)"}
    return training_curves(logs, panels, "", "Singular entropy of the head during training (Godey et al. 2024)",
                           sharey=False)


def figure_4_1(
    distributions: Mapping[str, np.ndarray],
    target: int,
    titles: Mapping[str, str],
    prompt_text: str,
    top_bytes: int,
    label: str = "Figure 4.1",
) -> plt.Figure:
    """Next-byte distributions of every model at one position; the correct byte in red (Figures 4.1, 7.1)."""
    stacked = np.stack(list(distributions.values()))
    shown = np.argsort(-stacked.max(0), kind="stable")[:top_bytes]
    shown = np.union1d(shown, [target])
    n = len(distributions)
    cols = min(4, n)
    fig, axes = plt.subplots(-(-n // cols), cols, figsize=(4.2 * cols, 3.2 * -(-n // cols)), squeeze=False, sharey=True)
    labels = [byte_name(int(b)) for b in shown]
    for ax, (name, probs) in zip(axes.flat, distributions.items()):
        colors = ["tab:red" if b == target else "tab:blue" for b in shown]
        ax.bar(range(len(shown)), probs[shown], color=colors)
        ax.set_xticks(range(len(shown)), labels, rotation=90, fontsize=7)
        ax.set_title(titles[name], fontsize=8)
        ax.set_xlabel("next byte")
        ax.set_ylabel("probability")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    shown_prompt = prompt_text if len(prompt_text) <= 160 else "…" + prompt_text[-160:]
    # the prompt's text is data: "$" must not start matplotlib's math mode (two failed the figure; `parse_math=False`
    # does not reach the wrapping of a long title), so it is escaped, and shown as "$"
    shown_prompt = shown_prompt.replace("$", r"\$")
    fig.suptitle(f"{label}: next-byte distributions after “{shown_prompt}” (correct byte in red)", fontsize=9, wrap=True)
    fig.tight_layout()
    return fig


def figure_4_2(per_byte: Mapping[str, pd.DataFrame]) -> plt.Figure:
    """Mean NSMD per target byte (most to least frequent) for two models, one panel per ground truth (`per_byte`:
    ground truth -> `per_byte_mean` frame), with the byte counts below."""
    first = next(iter(per_byte.values()))
    models = [c for c in first.columns if c != "count"]
    labels = [byte_name(int(b)) for b in first.index]
    x = np.arange(len(first))
    fig, axes = plt.subplots(len(per_byte) + 1, 1, figsize=(max(8, 0.16 * len(x)), 1 + 3 * len(per_byte)), sharex=True,
                             height_ratios=[3] * len(per_byte) + [1])
    width = 0.8 / len(models)
    for top, (ground_truth, frame) in zip(axes, per_byte.items()):
        frame = frame.reindex(first.index)
        for i, model in enumerate(models):
            top.bar(x + (i - (len(models) - 1) / 2) * width, frame[model], width, label=model)
        top.axhline(0, color="black", linewidth=0.5)
        top.set_ylabel(f"mean NSMD vs {ground_truth}")
        top.legend(title="model")
    bottom = axes[-1]
    bottom.bar(x, first["count"], color="grey")
    bottom.set_yscale("log")
    bottom.set_ylabel("occurrences")
    bottom.set_xlabel("target byte (most to least frequent)")
    bottom.set_xticks(x, labels, rotation=90, fontsize=6)
    fig.suptitle("Figure 4.2: oversmoothing (NSMD) per target byte, with the byte's frequency")
    fig.tight_layout()
    return fig


def frequency_figure(freqs: pd.DataFrame, title: str, byte_label: str, n_extreme: int = 10) -> plt.Figure:
    """Byte frequencies of every source against the reference (first column): overall, and for the
    reference's most and least frequent occurring bytes (Figures 4.3 and 5.1)."""
    occurring = freqs[freqs["count"] > 0].sort_values("count", ascending=False, kind="stable")
    columns = [c for c in freqs.columns if c != "count"]
    reference = columns[0]
    palette = dict(zip(columns, ["black", *sns.color_palette(n_colors=len(columns) - 1)]))
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5), gridspec_kw={"width_ratios": [2, 1, 1]})
    rank = np.arange(len(occurring))
    for name in columns:
        values = occurring[name].to_numpy()
        if name == reference:
            axes[0].plot(rank, values, color=palette[name], linewidth=2, label=name)
        else:
            shown = values > 0
            axes[0].scatter(rank[shown], values[shown], color=palette[name], s=14, label=name)
    axes[0].set_yscale("log")
    axes[0].set_xlabel(f"{byte_label} rank (most to least frequent)")
    axes[0].set_ylabel("relative frequency (zeros not drawn)")
    axes[0].set_title("overall")
    axes[0].legend(fontsize=7)
    for ax, part, subtitle in (
        (axes[1], occurring.head(n_extreme), f"{n_extreme} most frequent bytes"),
        (axes[2], occurring.tail(n_extreme), f"{n_extreme} least frequent bytes (occurring)"),
    ):
        long = part[columns].rename(index=lambda b: byte_name(int(b))).reset_index(names="byte").melt(
            id_vars="byte", var_name="source", value_name="frequency"
        )
        sns.barplot(data=long, x="byte", y="frequency", hue="source", palette=palette, ax=ax, legend=ax is axes[2])
        ax.set_title(subtitle)
        ax.set_xlabel(byte_label)
        ax.set_ylabel("relative frequency")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def figure_4_3(argmax: Mapping[str, np.ndarray], targets: np.ndarray) -> plt.Figure:
    """How often each byte is each model's argmax, against how often it is the target."""
    return frequency_figure(
        relative_frequencies(argmax, "targets", targets),
        "Figure 4.3: how often each byte is a model's argmax, against how often it is the target",
        "target byte",
    )


def figure_token_heads(summary: pd.DataFrame, models: Sequence[str], metrics: Sequence[str] = ("tto", "nsmd", "tv", "kl_eps"),
                       method: str = "pure") -> plt.Figure:
    """The token track: each metric of the rank-k heads against the full head, over k, one line per kind of head
    (SVD-truncated, learned), with bootstrap CIs."""
    rows = summary[(summary["method"] == method) & summary["model"].isin(models)].copy()
    rows[["kind", "k"]] = [token_head_parts(m) for m in rows["model"]]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.4 * len(metrics), 3.2), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for kind, group in rows[rows["metric"] == metric].groupby("kind", sort=False):
            group = group.sort_values("k")
            errors = [group["mean"] - group["ci_low"], group["ci_high"] - group["mean"]]
            ax.errorbar(group["k"], group["mean"], yerr=errors, marker="o", capsize=3, label=f"{kind} head")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rank k of the head")
        ax.set_title(f"{METRIC_LABELS[metric]} ({METHOD_LABELS[method]})", fontsize=9)
    axes[0][0].set_ylabel("mean against the full head")
    axes[0][-1].legend(fontsize=8)
    fig.suptitle("Token track: rank-k heads on the frozen source against its full head (bootstrap CIs)", fontsize=9)
    fig.tight_layout()
    return fig


def figure_token_bottleneck(points: pd.DataFrame) -> plt.Figure:
    """A real LM's softmax bottleneck against the rank k of its heads (`token_bottleneck_points`): the BAT-rejected
    mass (TBAT; pure and top-p, bootstrap CIs) and the share of the vocabulary no context can make the argmax (exact),
    one line per kind of head (SVD solid, learned dashed); the full head (a star) one step beyond the widest head,
    its tick naming its hidden size where Table B gives it (at 576 it would sit on top of k = 512)."""
    heads, full = points[points["kind"] != "full"], points[points["kind"] == "full"]
    full_x = 2 * int(heads["k"].max()) if len(heads) else 1
    hidden = full["k"].dropna()
    colors = dict(zip(["pure", "top-p", "share"], plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    titles = {"tbat": "BAT-rejected mass (TBAT)", "unargmaxable": "share of tokens never the argmax (exact)"}
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.4), squeeze=False)
    for ax, (panel, title) in zip(axes[0], titles.items()):
        shown = points[points["panel"] == panel]
        for (kind, line), group in shown.groupby(["kind", "line"], sort=False):
            group = group.assign(x=[full_x] * len(group) if kind == "full" else list(group["k"])).sort_values("x")
            style = {"marker": "*", "markersize": 11, "linestyle": "none"} if kind == "full" else \
                {"marker": "o", "linestyle": "-" if kind == "svd" else "--"}
            label = f"{kind} head" if line == "share" else f"{line}, {kind} head"
            ax.plot(group["x"], group["mean"], color=colors[line], label=label, **style)
            ax.vlines(group["x"], group["ci_low"], group["ci_high"], color=colors[line], linewidth=1)
        ticks = {int(k): str(int(k)) for k in heads["k"]}
        if len(full):
            ticks[full_x] = f"full\n({int(hidden.iloc[0])})" if len(hidden) else "full"
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(ticks), [ticks[t] for t in sorted(ticks)], fontsize=8)
        ax.set_xlabel("rank k of the head")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(title, fontsize=9)
        if len(shown):
            ax.legend(fontsize=7)
    fig.suptitle("Token track: the source LM's softmax bottleneck at rank k and at its full head (star)", fontsize=9)
    fig.tight_layout()
    return fig


def figure_5_1(freqs: pd.DataFrame, method: str = "pure") -> plt.Figure:
    """Byte frequencies of each model's samples against the human continuations (`sample_byte_frequencies`)."""
    return frequency_figure(
        freqs,
        f"Figure 5.1: byte frequencies of the models' samples ({METHOD_LABELS[method]}) against human text",
        "human byte",
    )


TOKEN_QUALITY_PANELS = {  # summary column -> (label, its CI columns, or None)
    "mauve_mean": ("MAUVE against human text", ("mauve_ci_low", "mauve_ci_high")),
    "bits_per_byte_mean": ("bits per byte under the judge", ("bits_per_byte_ci_low", "bits_per_byte_ci_high")),
    "valid_word_ratio_mean": ("valid-word ratio", ("valid_word_ratio_ci_low", "valid_word_ratio_ci_high")),
    "repetition": ("share of samples repeating a word n-gram", ("repetition_ci_low", "repetition_ci_high")),
}


def method_colors(methods: list[str]) -> dict[str, tuple | str]:
    """A colour per decoding method, distinct for up to 20 (the default cycle's 10, else tab20's)."""
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    if len(methods) > len(palette):
        palette = [plt.cm.tab20(i) for i in range(20)]
    return {method: palette[i % len(palette)] for i, method in enumerate(methods)}


def figure_token_quality(summary: pd.DataFrame, human: pd.DataFrame) -> plt.Figure:
    """The token track's sample quality against the rank k of its heads: one line per decoding method and kind of
    head (SVD solid, learned dashed) with bootstrap CIs, the full head per method as a dotted line, and human text
    (black) where the metric has a human value."""
    heads = summary[summary["model"] != TOKEN_REFERENCE].copy()
    heads[["kind", "k"]] = [token_head_parts(m) for m in heads["model"]]
    full = summary[summary["model"] == TOKEN_REFERENCE]
    methods = list(dict.fromkeys(summary["method"]))
    colors = method_colors(methods)
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


def figure_loss_matched(trajectory: pd.DataFrame, method: str = "pure") -> plt.Figure:
    """TTO and NSMD against each ground truth, TBAT, and the head's singular-entropy gap, against validation loss:
    one line per bottleneck through its checkpoints, the best weights marked."""
    picked = trajectory[trajectory["method"] == method].copy()
    picked["panel"] = [f"{METRIC_LABELS.get(m, m.upper())} vs {gt}" if gt else METRIC_LABELS.get(m, m.upper())
                       for m, gt in zip(picked["metric"], picked["ground_truth"])]
    gap = picked.drop_duplicates("point").assign(panel="head singular-entropy gap (Godey)")
    gap["mean"] = gap["singular_entropy_gap"]
    data = pd.concat([picked, gap], ignore_index=True).sort_values(["bottleneck", "iteration"])
    data["k"] = data["bottleneck"].astype(str)
    panels = list(dict.fromkeys(data["panel"]))
    grid = sns.FacetGrid(data, col="panel", col_order=panels, col_wrap=min(3, len(panels)), height=3.2, aspect=1.2,
                         sharey=False, hue="k", hue_order=[str(k) for k in sorted(data["bottleneck"].unique())])
    grid.map_dataframe(sns.lineplot, x="val_loss", y="mean", marker="o", sort=False, estimator=None)
    for ax, panel in zip(grid.axes.flat, panels):
        final = data[(data["panel"] == panel) & data["final"]]
        ax.scatter(final["val_loss"], final["mean"], marker="*", s=120, color="black", zorder=5, label="best weights")
    grid.axes.flat[0].invert_xaxis()  # training moves right (the panels share this axis: invert it once)
    grid.add_legend(title="k")
    grid.set_axis_labels("validation loss (nats/byte)", "")
    grid.set_titles("{col_name}")
    grid.figure.suptitle(f"Oversmoothing along training against validation loss ({method}; * best weights)", y=1.03)
    return grid.figure


def anisotropy_figure(table: pd.DataFrame) -> plt.Figure:
    """Anisotropy against relative depth (0 = embeddings, 1 = post-bottleneck), one line per model."""
    depth = table.groupby("model")["layer"].transform("max")
    data = table.assign(relative_depth=table["layer"] / depth)
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.lineplot(data=data, x="relative_depth", y="anisotropy", hue="model", marker="o", ax=ax)
    ax.set_xlabel("relative depth (embeddings → blocks → pre-bottleneck → post-bottleneck)")
    ax.set_ylabel("mean pairwise cosine similarity")
    ax.set_title("Anisotropy of representations per layer (Godey et al. 2024)")
    fig.tight_layout()
    return fig


def rank_loss_figure(table: pd.DataFrame) -> plt.Figure:
    """Validation loss against rank: learned head on the frozen model, SVD-imposed, trained from scratch."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for column, label in (("learned_head_loss", "learned rank-r head, frozen body"),
                          ("svd_imposed_loss", "SVD-imposed (truncated after training)"),
                          ("from_scratch_loss", "bottleneck trained from scratch")):
        ax.plot(table["rank"], table[column], marker="o", label=label)
    ax.axhline(table["source_loss"].iloc[0], color="grey", linestyle="--", label="source model")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("rank r of the head")
    ax.set_ylabel("validation loss (nats per byte)")
    ax.set_title("Learned vs imposed rank constraints (Godey et al. 2024)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure_support(table: pd.DataFrame) -> plt.Figure:
    """False against lost support, one curve per decoding method through its grid (pure, the model's own
    distribution, is each curve's point at no lost support), one panel per model, the intervals of false support as
    bars."""
    pure = table[table["method"] == "pure"]
    curves = [pd.concat([pure, table[table["method"] == method]]).assign(curve=METHOD_LABELS.get(method, method))
              for method in dict.fromkeys(table["method"]) if method != "pure"]
    data = pd.concat(curves, ignore_index=True).sort_values(["model", "curve", "lost_support_mean"])
    models = list(dict.fromkeys(table["model"]))
    grid = sns.FacetGrid(data, col="model", col_order=models, col_wrap=min(3, len(models)), height=3.4, aspect=1.15,
                         hue="curve", sharex=False, sharey=False)
    grid.map_dataframe(sns.lineplot, x="lost_support_mean", y="false_support_mean", marker="o", sort=False,
                       estimator=None, markersize=4)
    for ax, model in zip(grid.axes.flat, models):
        rows = data[data["model"] == model]
        ax.errorbar(rows["lost_support_mean"], rows["false_support_mean"],
                    yerr=[rows["false_support_mean"] - rows["false_support_ci_low"],
                          rows["false_support_ci_high"] - rows["false_support_mean"]],
                    fmt="none", ecolor="grey", alpha=0.4, lw=0.8)
        separable = pure[pure["model"] == model]["inseparable_mean"]
        if len(separable) and np.isfinite(separable.iloc[0]):
            ax.set_title(f"{model} (no threshold separates: {separable.iloc[0]:.0%})", fontsize=9)
        else:
            ax.set_title(model, fontsize=9)
    grid.add_legend(title="method")
    grid.set_axis_labels("lost support (truth mass removed)", "false support (mass on truth zeros)")
    grid.figure.suptitle("Support recovery against the truth: false against lost support per decoding method", y=1.03)
    return grid.figure
