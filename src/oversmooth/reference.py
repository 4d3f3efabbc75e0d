"""Reference implementations: the definitions written plainly, one position at a time.

They are the oracle of the test suite and the baseline of `benchmarks/`; the pipeline uses the
vectorised versions in `oversmooth.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def nucleus_set(p_gt: Sequence[float], tau: float) -> set[int]:
    """Fewest most probable tokens whose mass reaches tau (ties: lower index first)."""
    order = sorted(range(len(p_gt)), key=lambda i: (-p_gt[i], i))
    chosen, mass = set(), 0.0
    for i in order:
        if chosen and mass >= tau:
            break
        chosen.add(i)
        mass += p_gt[i]
    return chosen


def tto(p_bn: Sequence[float], p_gt: Sequence[float], tau: float) -> float:
    nucleus = nucleus_set(p_gt, tau)
    return sum(max(0.0, p_bn[w] - p_gt[w]) for w in range(len(p_gt)) if w not in nucleus)


def nsmd(p_bn: Sequence[float], p_gt: Sequence[float], tau: float) -> float:
    return sum(p_gt[w] - p_bn[w] for w in nucleus_set(p_gt, tau))


def tv(p_bn: Sequence[float], p_gt: Sequence[float]) -> float:
    return 0.5 * sum(abs(p_gt[w] - p_bn[w]) for w in range(len(p_gt)))


def kl(p_bn: Sequence[float], p_gt: Sequence[float]) -> float:
    total = 0.0
    for w in range(len(p_gt)):
        if p_gt[w] > 0:
            if p_bn[w] == 0:
                return math.inf
            total += p_gt[w] * math.log(p_gt[w] / p_bn[w])
    return total


def entropy(p: Sequence[float]) -> float:
    return -sum(x * math.log(x) for x in p if x > 0)


def entropy_diff(p_bn: Sequence[float], p_gt: Sequence[float]) -> float:
    return entropy(p_bn) - entropy(p_gt)
