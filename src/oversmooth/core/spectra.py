"""Spectral measures of a matrix (thesis §7.2, Godey et al. 2024), with no dependency on models or data.

- `effective_rank`: Roy & Vetterli (2007), exp of the entropy of the normalised singular values;
  `threshold_rank`: how many singular values exceed a fraction of the largest;
  `energy_rank`: the rank that keeps a share of the spectrum's energy (Σσ²).
- `singular_entropy_gap`: Godey et al.'s saturation probe, KL(normalised spectrum || uniform).
- `anisotropy`: mean pairwise cosine similarity of representations.
"""

from __future__ import annotations

import numpy as np
import torch


def singular_values(matrix: np.ndarray | torch.Tensor) -> np.ndarray:
    """Singular values of a 2-D matrix, in float64, largest first."""
    array = matrix.detach().cpu().double().numpy() if isinstance(matrix, torch.Tensor) else np.asarray(matrix, float)
    if array.ndim != 2:
        raise ValueError(f"expected a 2-D matrix, got shape {array.shape}")
    return np.linalg.svd(array, compute_uv=False)


def _spectrum_distribution(s: np.ndarray) -> np.ndarray:
    total = s.sum()
    if total <= 0:
        raise ValueError("the matrix is zero: its spectrum has no distribution")
    return s / total


def effective_rank(s: np.ndarray) -> float:
    """Roy–Vetterli effective rank of singular values `s`: exp(H(s / Σs)), between 1 and len(s)."""
    p = _spectrum_distribution(np.asarray(s, float))
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def threshold_rank(s: np.ndarray, fraction: float) -> int:
    """How many singular values exceed `fraction` of the largest."""
    s = np.asarray(s, float)
    return int((s > fraction * s.max()).sum())


def energy_rank(s: np.ndarray, share: float) -> int:
    """The smallest r whose r largest singular values carry `share` of Σσ² (the best rank-r approximation's
    share of the squared Frobenius norm)."""
    energy = np.cumsum(np.sort(np.asarray(s, float))[::-1] ** 2)
    return int(np.searchsorted(energy, share * energy[-1] - 1e-12 * energy[-1]) + 1)


def singular_entropy_gap(s: np.ndarray) -> float:
    """KL(σ / Σσ || uniform) = log n - H(σ / Σσ): 0 for a flat spectrum, log n for rank 1 (Godey et al. 2024)."""
    p = _spectrum_distribution(np.asarray(s, float))
    nonzero = p[p > 0]
    return float(np.log(len(p)) + (nonzero * np.log(nonzero)).sum())


def anisotropy(x: np.ndarray) -> float:
    """Mean cosine similarity over all pairs of distinct rows of `x` (n × d): 1 for identical directions, near 0
    for isotropic random vectors. O(n d): ‖Σ x̂_i‖² = n + Σ_{i≠j} cos(x_i, x_j)."""
    x = np.asarray(x, np.float64)
    n = len(x)
    if n < 2:
        raise ValueError("anisotropy needs at least two vectors")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("anisotropy is undefined for a zero vector")
    total = (x / norms).sum(axis=0)
    return float((total @ total - n) / (n * (n - 1)))
