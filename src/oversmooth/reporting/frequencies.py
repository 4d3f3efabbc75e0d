"""Relative byte frequencies beside a reference (Figures 4.3 and 5.1's data). Apart from `metrics_report`, so that
the figures and the sample-quality tables that use them do not run the metrics' formulas: editing a formula reruns
neither."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd


def relative_frequencies(counts: Mapping[str, np.ndarray], reference: str, reference_counts: np.ndarray) -> pd.DataFrame:
    """Relative frequency of each byte per source, the reference first; `count` holds the reference counts."""
    frame = pd.DataFrame({name: c / max(c.sum(), 1) for name, c in counts.items()})
    frame.insert(0, reference, reference_counts / reference_counts.sum())
    frame["count"] = reference_counts
    return frame
