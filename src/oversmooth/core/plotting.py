"""The plotting back end every figure shares: matplotlib without a display, seaborn, and figures written as PNG
and PDF atomically. Apart from the figures themselves (`figures`), so that editing a figure reruns figure jobs
only; the jobs that draw beside their analysis (`rank`, `headfit`, `along_training`) reach this module too."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from oversmooth.core.io import atomic_path  # noqa: E402

__all__ = ["plt", "save_figure", "sns"]


# A PDF's creation date would make every rebuild differ: the same inputs give the same bytes (PNG has no date).
FIGURE_METADATA = {"png": None, "pdf": {"CreationDate": None}}


def save_figure(fig: plt.Figure, png_path: str | os.PathLike, pdf_path: str | os.PathLike) -> None:
    """Write a figure as PNG and PDF, atomically and byte-reproducibly, and close it."""
    for path, fmt in ((png_path, "png"), (pdf_path, "pdf")):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight", metadata=FIGURE_METADATA[fmt])
    plt.close(fig)
