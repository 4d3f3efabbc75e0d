"""Reference implementations: the definitions written plainly, one position at a time.

They are the oracle of the test suite and the baseline of `benchmarks/`; the pipeline uses the
vectorised versions in `oversmooth.analysis.metrics`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def nucleus_mask_by_sort(probs: np.ndarray, tau: float) -> np.ndarray:
    """The nucleus mask of every row by a full stable sort, the mass before each entry, scattered back (the
    definition, vectorised the obvious way: the oracle and the baseline of `decoding.nucleus_mask`)."""
    order = np.argsort(-probs, axis=-1, kind="stable")  # descending, ties in index order
    values = np.take_along_axis(probs, order, axis=-1)
    inside = (np.cumsum(values, -1) - values) < tau
    inside[..., 0] = True
    mask = np.zeros_like(inside)
    np.put_along_axis(mask, order, inside, axis=-1)
    return mask


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


def bat_reject_set(
    p, W, threshold: float = 0.2, zero_tol: float = 1e-9, skip_above_threshold: bool = True, feasibility_tol: float = 1e-9,
    tokens=None, method: str = "highs", presolve: bool = True,
):
    """BAT-rejected bytes by the definition, one `scipy.optimize.linprog` (HiGHS) per byte, rebuilt each
    time, as the thesis code did: minimise q_i s.t. sum(q) = 1, W^T q = W^T p, 0 <= q <= p / (1 - threshold);
    i is rejected iff the minimum is <= zero_tol. Bytes with p_i > threshold cannot be rejected (the other
    bytes' bounds sum to less than 1); the thesis skipped them, and so does this unless told otherwise.

    HiGHS's feasibility tolerances are set to `feasibility_tol` (its default, 1e-7, would let q_i = 0 pass
    for p_i below about 1e-7). `tokens`: decide only these indices (a subsample of a large vocabulary; the
    others come back not rejected). `method`: linprog's; "highs-ipm" (HiGHS's interior-point method, then its
    crossover to a vertex) takes minutes per token over a dense head of 49,152 x 577 where its simplex took over 28
    minutes on a rejected one. `presolve`: HiGHS's presolve, which declared LPs infeasible (p itself is feasible)
    under a sampler's thresholds, bounds of ~1e-4 relative to p beside rows of scale 1. Returns (rejected: bool array, failures: indices whose LP did not solve;
    never counted as accept or reject).
    """
    from scipy.optimize import linprog

    p = np.asarray(p, dtype=np.float64)
    A = np.vstack([np.asarray(W, dtype=np.float64).T, np.ones(len(p))])
    bounds = np.stack([np.zeros(len(p)), p / (1 - threshold)], axis=1)
    rejected, failures = np.zeros(len(p), dtype=bool), []
    for i in range(len(p)) if tokens is None else tokens:
        if skip_above_threshold and p[i] > threshold:
            continue
        cost = np.zeros(len(p))
        cost[i] = 1.0
        res = linprog(
            cost, A_eq=A, b_eq=A @ p, bounds=bounds, method=method,
            options={"primal_feasibility_tolerance": feasibility_tol, "dual_feasibility_tolerance": feasibility_tol,
                     "presolve": presolve},
        )
        if res.status != 0:
            failures.append(i)
        else:
            rejected[i] = res.fun <= zero_tol
    return rejected, failures


def token_marginal_next_byte(
    model, token_bytes: Sequence[bytes | None], prefix: Sequence[int], text: bytes, *, beam: int, prune_ratio: float
) -> list[float]:
    """p(b | text) over 256 bytes for a token-level causal LM after the fixed tokens `prefix`, computed from scratch:
    every aligned tokenisation of `text[:j]` kept by the same beam and pruning rule as `oversmooth.models.tokenmarginal`
    (beam 0 and prune_ratio 0 keep all), each scored by one full forward pass of its tokens, no cache."""
    import torch

    def next_token_logprobs(tokens: list[int]) -> list[float]:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([list(prefix) + tokens])).logits[0, -1].double()
        return torch.log_softmax(logits, -1).tolist()

    def log_add(a: float, b: float) -> float:
        if a == -math.inf:
            return b
        hi, lo = max(a, b), min(a, b)
        return hi + math.log1p(math.exp(lo - hi))

    pending: dict[int, list[tuple[list[int], float]]] = {0: [([], 0.0)]}
    prefix_mass = [[-math.inf] * 256 for _ in range(len(text) + 1)]  # log P(text[:i] b)
    for end in range(len(text) + 1):
        hyps = pending.pop(end, [])
        hyps = sorted(hyps, key=lambda h: -h[1])
        if end and prune_ratio > 0:  # the most probable one always stays
            floor = prefix_mass[end - 1][text[end - 1]] + math.log(prune_ratio)
            hyps = hyps[:1] + [h for h in hyps[1:] if h[1] >= floor]
        hyps = hyps[:beam] if beam > 0 and end else hyps
        for tokens, logp in hyps:
            logprobs = next_token_logprobs(tokens)
            for token, spelling in enumerate(token_bytes):
                if not spelling or logprobs[token] == -math.inf:
                    continue
                score = logp + logprobs[token]
                for i in range(end, min(len(text), end + len(spelling) - 1) + 1):
                    remainder = text[end:i]  # the token covers text[:i] and goes on with byte spelling[len(remainder)]
                    if not spelling.startswith(remainder):
                        break
                    row = prefix_mass[i]
                    row[spelling[len(remainder)]] = log_add(row[spelling[len(remainder)]], score)
                if text.startswith(spelling, end):
                    pending.setdefault(end + len(spelling), []).append((tokens + [token], score))
    final = prefix_mass[len(text)]
    total = -math.inf
    for value in final:
        total = log_add(total, value)
    return [math.exp(v - total) for v in final]
