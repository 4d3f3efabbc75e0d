"""The tables of two runs of one config side by side (e.g. a GPU run against a CPU run, benchmarks/gpu_check.sh):
    python benchmarks/compare_runs.py runs/gpu-check runs/cpu-check [--tolerance 0.05]
For each CSV table both runs wrote: its numeric cells' largest absolute and relative difference, the median relative
difference, and the share of cells within `--tolerance` (relative, or absolute below 1e-3 in magnitude); cells that are
not numbers must be equal. Prints a Markdown table, one row per table, worst first.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

SMALL = 1e-3  # below this magnitude a difference counts in absolute terms


def compare_table(a: pd.DataFrame, b: pd.DataFrame, tolerance: float) -> dict:
    """The differences between two versions of one table (same shape expected)."""
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return {"cells": 0, "note": f"shapes differ: {a.shape} vs {b.shape}"}
    numeric = [c for c in a.columns if pd.api.types.is_numeric_dtype(a[c]) and pd.api.types.is_numeric_dtype(b[c])]
    text = [c for c in a.columns if c not in numeric]
    unequal_text = int((a[text].fillna("").astype(str).to_numpy() != b[text].fillna("").astype(str).to_numpy()).sum())
    x, y = a[numeric].to_numpy(float).ravel(), b[numeric].to_numpy(float).ravel()
    both = np.isfinite(x) & np.isfinite(y)
    nan_mismatch = int((np.isfinite(x) != np.isfinite(y)).sum())
    diff = np.abs(x[both] - y[both])
    scale = np.maximum(np.maximum(np.abs(x[both]), np.abs(y[both])), SMALL)
    relative = diff / scale
    return {
        "cells": int(both.sum()),
        "max_abs": float(diff.max()) if diff.size else 0.0,
        "max_rel": float(relative.max()) if diff.size else 0.0,
        "median_rel": float(np.median(relative)) if diff.size else 0.0,
        "within": float((relative <= tolerance).mean()) if diff.size else 1.0,
        "note": "; ".join(filter(None, [f"{unequal_text} text cells differ" if unequal_text else "",
                                        f"{nan_mismatch} cells finite in one run only" if nan_mismatch else ""])),
    }


def compare_runs(first: Path, second: Path, tolerance: float) -> pd.DataFrame:
    tables = sorted({p.name for p in (first / "results" / "tables").glob("*.csv")}
                    & {p.name for p in (second / "results" / "tables").glob("*.csv")})
    rows = [{"table": name, **compare_table(pd.read_csv(first / "results" / "tables" / name),
                                              pd.read_csv(second / "results" / "tables" / name), tolerance)}
            for name in tables]
    return pd.DataFrame(rows).sort_values(["within", "max_rel"], ascending=[True, False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tolerance", type=float, default=0.05)
    args = parser.parse_args()
    result = compare_runs(args.first, args.second, args.tolerance)
    print(result.to_markdown(index=False, floatfmt=".3g"))
    total = result["cells"].sum()
    within = (result["within"] * result["cells"]).sum() / max(total, 1)
    print(f"\n{len(result)} tables, {total} numeric cells, {within:.1%} within {args.tolerance:g} (relative)")


if __name__ == "__main__":
    main()
