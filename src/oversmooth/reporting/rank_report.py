"""Table 7.3 and the anisotropy table (thesis §7.2; Godey et al. 2024) from each model's rank files, which
`analysis.rank` computes; apart from it so that the table jobs load no torch."""

from __future__ import annotations

import pandas as pd

# The representations whose ranks thesis §7.2 measures, in Table 7.3's order: `analysis.rank.REPRESENTATIONS` (a test
# holds the two together; neither module imports the other, so an edit to one reruns only its own jobs)
REPRESENTATION_LABELS = {
    "logits": "Logits",
    "probabilities": "Probabilities",
    "post_bottleneck": "Post-bottleneck",
    "pre_bottleneck": "Pre-bottleneck",
}


def table_7_3(ranks: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per model: the effective rank of each representation, then the threshold ranks (Table 7.3)."""
    rows = []
    for model, frame in ranks.items():
        frame = frame.set_index("representation")
        row = {"model": model, "positions": int(frame["positions"].iloc[0])}
        for column, label in (("effective_rank", "effective rank"), ("threshold_rank", "threshold rank")):
            for name, name_label in REPRESENTATION_LABELS.items():
                row[f"{name_label} {label}"] = frame.loc[name, column]
        rows.append(row)
    return pd.DataFrame(rows)


def anisotropy_table(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per model and representation (long format: models differ in depth)."""
    return pd.concat([frame.assign(model=model) for model, frame in frames.items()], ignore_index=True)[
        ["model", "layer", "representation", "anisotropy", "vectors", "dim"]
    ]
