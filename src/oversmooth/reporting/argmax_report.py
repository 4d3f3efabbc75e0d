"""Table B (thesis appendix B: the unargmaxable bytes of each bottleneck) and its token-track version (the tokens a
rank-k head can never predict), from the records `analysis.argmax` writes; apart from it so that the table job
loads no torch. And the token track's exact analyses against rank, from its Tables E.7, E.8 and B."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from oversmooth.core.catalog import TOKEN_REFERENCE, token_head_parts
from oversmooth.data.bytenames import byte_name


def table_b(records: list[dict]) -> pd.DataFrame:
    """Thesis Tables B.1/B.2 in one: exact and approximate counts and byte names per bottleneck."""
    def names(bytes_):
        return " ".join(byte_name(b) for b in bytes_)

    return pd.DataFrame(
        [
            {
                "bottleneck": r["k"], "model": r["model"],
                "n_unargmaxable": len(r["unargmaxable"]), "unargmaxable": names(r["unargmaxable"]),
                "n_beyond_norm": len(r["beyond_norm"]),
                "n_flagged_approx": len(r["flagged_approx"]), "flagged_approx": names(r["flagged_approx"]),
                "n_false_flags": len(r["cleared_with_witness"]), "n_failed": len(r["failed"]),
            }
            for r in records
        ]
    )


def unargmaxable_token_table(records: list[dict], targets: np.ndarray, token_text: Callable[[int], str],
                             top_n: int = 12) -> pd.DataFrame:
    """Per head (a `argmax.vertex_record`): how many tokens can and cannot be the argmax, the share of the corpus
    tokens `targets` (the cached training text's next tokens) that can never be, and the most frequent of those
    tokens there, each with its count and its text (`token_text`: `models.tokentext.token_text`)."""
    rows = []
    for record in records:
        counts = np.bincount(targets, minlength=record["n_rows"])
        never = np.asarray(record["unargmaxable"], dtype=np.int64)
        order = never[np.argsort(-counts[never], kind="stable")]
        frequent = [t for t in order[:top_n] if counts[t] > 0]
        kind = "full" if record["model"] == TOKEN_REFERENCE else token_head_parts(record["model"])[0]
        rows.append({
            "model": record["model"], "kind": kind, "k": record["k"], "vocabulary": record["n_rows"],
            "n_argmaxable": len(record["argmaxable"]), "n_unargmaxable": len(never),
            "n_duplicated": len(record["duplicates"]), "n_failed": len(record["failed"]),
            "corpus_tokens": int(counts.sum()), "corpus_share_never_argmax": float(counts[never].sum() / counts.sum()),
            "most_frequent_never_argmax": " ".join(f"{token_text(int(t))!r}×{counts[t]}" for t in frequent),
        })  # the time stays in the record: a table holds only what the same config reproduces
    return pd.DataFrame(rows)


def token_bottleneck_points(tbat_pure: pd.DataFrame, tbat_truncated: pd.DataFrame | None,
                            table_b: pd.DataFrame | None) -> pd.DataFrame:
    """The points of `figures.figure_token_bottleneck`, long: panel, kind (svd, learned, full), k (the full head's:
    its hidden size from Table B, else None), line (pure, top-p or the share), mean and interval, from the token
    track's Tables E.7 (pure), E.8 (top-p) and B; heads whose TBAT was not computed are left out."""
    full_k = None
    if table_b is not None and (table_b["model"] == TOKEN_REFERENCE).any():
        full_k = int(table_b.set_index("model").loc[TOKEN_REFERENCE, "k"])
    points = []
    tbat = [(tbat_pure, "Pure", "pure")] + ([(tbat_truncated, "Top-P", "top-p")] if tbat_truncated is not None
                                           and "Top-P mean" in tbat_truncated else [])
    for table, label, line in tbat:
        for _, row in table[table[f"{label} mean"].notna()].iterrows():
            kind, k = ("full", full_k) if row["model"] == TOKEN_REFERENCE else token_head_parts(row["model"])
            points.append({"panel": "tbat", "kind": kind, "k": k, "line": line, "mean": row[f"{label} mean"],
                           "ci_low": row[f"{label} ci_low"], "ci_high": row[f"{label} ci_high"]})
    if table_b is not None:
        for _, row in table_b.iterrows():
            share = row["n_unargmaxable"] / row["vocabulary"]
            points.append({"panel": "unargmaxable", "kind": row["kind"], "k": int(row["k"]), "line": "share",
                           "mean": share, "ci_low": share, "ci_high": share})
    return pd.DataFrame(points, columns=["panel", "kind", "k", "line", "mean", "ci_low", "ci_high"])
