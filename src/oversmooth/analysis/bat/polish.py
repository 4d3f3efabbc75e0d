"""The polish: each token the descent leaves, settled by min q_i over parts of P chosen from the descent's direction.

Solved by a dense interior-point method (`lp.interior_point`; A's rows made orthonormal first: tokens of mass 1e-15
beside 0.1 would otherwise condition it), freeing the tail tokens that carry the duality gap until the token is
settled (POLISH_ROUNDS at most): at k = 576 it left none for HiGHS at the positions measured (a token left gets at
most DENSE_PRICING_ROUNDS rounds of LPs, then its position fails)."""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.bat import lp, settings
from oversmooth.analysis.bat.polytope import Polytope


def polish(P: Polytope, i: int, s: np.ndarray, undecided: np.ndarray, rejected: np.ndarray) -> bool:
    """Settle token i by min q_i over parts of P (in place), from the descent's direction s (on the support):
    the column generation's free tokens and the POLISH_KINKS tokens of mass >= POLISH_FLOOR with the smallest
    |s_l| move freely, every other token (the tail) only as q_T = p_T + theta (v - p_T), theta in [0, 1], v the
    vertex of the tail's box that the direction's signs ask for (u_l where s_l > 0). Each such LP is solved by
    `interior_point` (dense, r rows); its q, checked against P, rejects the tokens it zeroes, its dual s'
    accepts those it certifies (`Polytope.settle`). Where i is left, the POLISH_KINKS tail tokens with the largest
    shares of the duality gap (|q_l - the bound s' asks for| times |s'_l|) join the free ones, v follows s', and
    the LP is solved again, POLISH_ROUNDS times at most (or until the tail's share of the gap is negligible).
    Whether i was settled; if not, the column generation takes it."""
    p, u, support = P.p, P.u, P.support
    kinks = support[p[support] >= settings.POLISH_FLOOR]
    kinks = kinks[np.argsort(np.abs(s[np.searchsorted(support, kinks)]), kind="stable")[: settings.POLISH_KINKS]]
    free = np.zeros(P.V, dtype=bool)
    free[lp.free_tokens(P, undecided)] = True
    free[kinks] = free[i] = True
    at_top = np.zeros(P.V, dtype=bool)
    at_top[support] = s > 0
    for _ in range(settings.POLISH_ROUNDS):
        found = polish_lp(P, i, np.flatnonzero(free), at_top)
        if found is None:
            return False
        q, s, in_p = found
        P.settle(q if in_p else np.ones(P.V), s, undecided, rejected)
        if not undecided[i]:
            return True
        # q_l's reduced cost, l != i (the LP's objective is q_i / u_i; i is free): -s_l. The optimum has
        # q_l = u_l where it is negative, else 0; each tail token's share of the duality gap is how far it is off
        reduced = -s
        gap = np.where(reduced < 0, (q - u) * reduced, q * reduced)
        gap[free] = 0.0
        if gap.sum() <= P.settings.feasibility_tol:  # the tail is where s' asks: more tokens would not help
            return False
        joining = np.argpartition(-gap, min(settings.POLISH_KINKS, P.V - 1))[: settings.POLISH_KINKS]
        free[joining[gap[joining] > 0]] = True
        at_top = reduced < 0
    return False


def polish_lp(P: Polytope, i: int, free: np.ndarray, at_top: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """min q_i over the part of P where the `free` tokens move in [0, u] and the others towards the vertex
    (u_l where at_top, else 0) by `interior_point`: q, the dual direction s = Q^T y over every token, and
    whether q is in P (an iterate short of convergence may not be); None where the method's iterates or the
    dual are not finite."""
    Q, p, u = P.Q, P.p, P.u
    tail = np.ones(P.V, dtype=bool)
    tail[free] = False
    move = np.where(tail & at_top, u, 0.0) - p
    move[~tail] = 0.0
    # the free tokens scaled to [0, 1] (q_l = u_l x_l), theta last
    A = np.hstack([Q[:, free] * u[free], (Q @ move)[:, None]])
    cost = np.zeros(len(free) + 1)
    cost[np.searchsorted(free, i)] = 1.0
    solution = lp.interior_point(A, Q[:, free] @ p[free], cost, P.settings.feasibility_tol * 1e-1)
    if solution is None:
        return None
    x, y, _ = solution  # converged or not, q is checked and y gives a bound whatever it is
    s = Q.T @ y
    if not np.isfinite(s).all():  # an iterate that stopped short of an infeasible LP: y huge
        return None
    q = p + x[-1] * move
    q[free] = x[:-1] * u[free]
    in_p = P.contains(q, 10 * P.settings.feasibility_tol)  # as an LP's answer
    return q, s, in_p
