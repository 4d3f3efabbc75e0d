"""The training stage's table: Table 3.1 (its figures are in `figures`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from oversmooth.core.logs import get_logger

log = get_logger("report")


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
