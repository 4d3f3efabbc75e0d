"""Tables and figures of the training stage: Table 3.1 and Figure 3.1."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from oversmooth.io import atomic_path  # noqa: E402
from oversmooth.logs import get_logger  # noqa: E402
from oversmooth.seeds import with_seed_rows  # noqa: E402

log = get_logger("report")


def write_csv(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """A table as CSV (floats to 6 significant digits), atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")


def write_table(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """A final table as CSV, with each bottleneck's across-seed mean and sd rows where it has several runs."""
    write_csv(with_seed_rows(frame), path)


def save_figure(fig: plt.Figure, png_path: str | os.PathLike, pdf_path: str | os.PathLike) -> None:
    """Write a figure as PNG and PDF, atomically, and close it."""
    for path, fmt in ((png_path, "png"), (pdf_path, "pdf")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight")
    plt.close(fig)


def table_3_1(results: Sequence[Mapping], ground_truths: Sequence[str], best_val: Mapping[str, float]) -> pd.DataFrame:
    """Validation loss and argmax accuracy per model (and for a token-level ground truth the loss of its own
    tokenisation of the same bytes, `token_level_loss`); a loud note where a ground truth does not beat every
    bottlenecked model (the thesis assumes it does)."""
    frame = pd.DataFrame(results).reindex(columns=["model", "heldout_loss", "token_level_loss", "accuracy_pct", "bytes"])
    frame.insert(1, "role", ["ground truth" if m in ground_truths else "bottleneck" for m in frame["model"]])
    frame.insert(2, "best_val_loss", [best_val.get(m, float("nan")) for m in frame["model"]])
    frame["note"] = ""
    bottlenecked = frame[frame["role"] == "bottleneck"]
    for i, row in frame[frame["role"] == "ground truth"].iterrows():
        beaten_by = bottlenecked[bottlenecked["heldout_loss"] <= row["heldout_loss"]]["model"].tolist()
        if beaten_by:
            frame.loc[i, "note"] = f"WARNING: not better than {', '.join(beaten_by)}"
            log.warning(
                "ground truth %s (held-out loss %.4f) is not better than %s: train it longer or larger",
                row["model"], row["heldout_loss"], beaten_by,
            )
    if frame["token_level_loss"].isna().all():  # no token-level ground truth
        frame = frame.drop(columns="token_level_loss")
    return frame.round({"heldout_loss": 4, "token_level_loss": 4, "best_val_loss": 4, "accuracy_pct": 2})


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
