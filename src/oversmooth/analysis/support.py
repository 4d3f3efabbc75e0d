"""Support recovery: decoding as desmoothing, measured against a truth whose support is known (Hewitt et al. 2022
call truncation desmoothing: a model's distribution is the truth mixed with smoothing, and truncation tries to cut
the smoothing away).

With p the truth's next-byte distribution (zero where the teacher's own decoding truncated), m the model's
distribution and q = decode(m), per position:
- false support = sum over bytes with p = 0 of q: the mass the decoded distribution keeps where the truth writes
  nothing;
- lost support = sum over bytes with q = 0 of p: the true mass the decoding removed;
- separable: whether a threshold on the model's own probabilities can keep the truth's support and drop its zeros,
  i.e. every byte the truth writes is more probable under m than every byte it never writes (min over p > 0 of m
  > max over p = 0 of m; NaN where the truth has no zero). Where it is 0, no method that keeps the bytes above a
  threshold of m (greedy, top-k, top-p, epsilon, min-p) can recover the support exactly: the thesis's §2.3 claim,
  counted.

Everything is vectorised over positions in float64, as the metrics are.
"""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.decoding import Decoding


def false_support(logq: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """The decoded distribution's mass on bytes the truth gives probability 0, per position."""
    return np.where(np.isneginf(logp), np.exp(logq), 0.0).sum(-1)


def lost_support(logq: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """The truth's mass on bytes the decoded distribution gives probability 0, per position."""
    return np.where(np.isneginf(logq), np.exp(logp), 0.0).sum(-1)


def threshold_separable(logm: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """1.0 where a threshold on the model's probabilities separates the truth's support from its zeros, 0.0 where
    some byte the truth never writes is at least as probable under the model as one it writes, NaN where the truth
    has no zero (nothing to separate)."""
    zero = np.isneginf(logp)
    lowest_true = np.where(zero, np.inf, logm).min(-1)
    highest_false = np.where(zero, logm, -np.inf).max(-1)
    return np.where(zero.any(-1), (lowest_true > highest_false).astype(float), np.nan)


def support_recovery(logm: np.ndarray, logp: np.ndarray, decoding: Decoding) -> dict[str, np.ndarray]:
    """Per position, the false and lost support of `decoding` applied to the model's log-probabilities `logm`
    against the truth's `logp` (both (..., 256), normalised)."""
    logq = decoding(logm)
    return {"false_support": false_support(logq, logp), "lost_support": lost_support(logq, logp)}
