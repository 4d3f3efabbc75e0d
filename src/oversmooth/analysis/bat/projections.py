"""Alternating projections: witnesses, without an LP, for tokens the screen and the repairs left (where the descent
follows).

From p with q_i = 0, the nearest point of the plane A q = A p, q_i = 0 in the p-weighted norm, clipped into [0, u]
shrunk by a margin, and again (`project`); a plane point inside [0, u] is a witness, checked. At k = 576 under pure
sampling they reject 94-200 tokens a position at the demo's positions in 4-8 s, each of which the descent took
400-600 iterations to reject."""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.polytope import Polytope


def project(P: Polytope, Z: np.ndarray, undecided: np.ndarray, rejected: np.ndarray) -> int:
    """Reject the undecided tokens for which alternating projections find a witness (in place); how many.

    From p with q_i = 0, each round moves q to the nearest point (in the p-weighted norm) of the plane
    A q = A p, q_i = 0 (`onto_plane`, with the screen's whitened Z for w = p) and clips it into the box shrunk
    by PROJECTION_MARGIN p (so that the next plane point, once near, lies inside [0, u]): PROJECTION_ROUNDS
    rounds at most, in float32; a token leaves once its mass outside [0, u] has not halved in PROJECTION_STALL
    rounds (an accepted token's stays at 2-14 p_i). A plane point inside [0, u] is projected again in float64
    from the same point, and checked as a witness (`Polytope.witnesses`). At SmolLM2's head it rejects 94-200 tokens
    a position under pure sampling, leaving the descent 0-15 to reject (it took 400-600 iterations for each)."""
    if len(Z) < len(P.Q):  # M inverted on part of its range: every plane point would miss A p there
        return 0
    support = P.support
    ps, us, found = P.p[support], P.u[support], 0
    ps32, us32, Z32 = ps.astype(np.float32), us.astype(np.float32), Z.astype(np.float32)
    low, high = ps32 * np.float32(settings.PROJECTION_MARGIN), us32 - ps32 * np.float32(settings.PROJECTION_MARGIN)
    order = np.flatnonzero(undecided)
    step = max(1, settings.SCREEN_VALUES // len(support))
    for start in range(0, len(order), step):
        tokens = order[start : start + step]
        at = np.searchsorted(support, tokens)
        Zi = Z[:, at].T
        held = 1 - ps[at] * np.einsum("ij,ij->i", Zi, Zi)  # 1 - p_i K_ii: > 0 unless i alone carries a row
        keep = held > settings.SCREEN_ERROR
        tokens, at, Zi, held = tokens[keep], at[keep], Zi[keep], held[keep]
        q = np.tile(ps32, (len(tokens), 1))  # float32: a candidate in the box is projected again in float64
        q[np.arange(len(tokens)), at] = 0.0
        before = np.full(len(tokens), np.inf)  # each token's mass outside [0, u] PROJECTION_STALL rounds ago
        for round_ in range(settings.PROJECTION_ROUNDS):
            if not len(tokens):
                break
            moved = onto_plane(q, ps32, Z32, Zi.astype(np.float32), at, held.astype(np.float32))
            outside = np.maximum(np.maximum(-moved, moved - us32), 0.0).sum(1)
            inside = np.flatnonzero(outside == 0)  # checked, then gone (one that fails would stay so)
            exact = onto_plane(q[inside].astype(np.float64), ps, Z, Zi[inside], at[inside], held[inside])
            in_box = ((exact >= 0) & (exact <= us)).all(1)
            boxed = inside[in_box]
            good = boxed[P.witnesses(exact[in_box], tokens[boxed])]
            rejected[tokens[good]], undecided[tokens[good]] = True, False
            found += len(good)
            left = np.ones(len(tokens), dtype=bool)
            left[inside] = False
            if round_ % settings.PROJECTION_STALL == 0:  # stalled: left to the descent
                left &= outside <= before / 2
                before = outside
            tokens, at, Zi, held, before = tokens[left], at[left], Zi[left], held[left], before[left]
            q = np.clip(moved[left], low, high)
            q[np.arange(len(tokens)), at] = 0.0
    return found


def onto_plane(q: np.ndarray, p: np.ndarray, Z: np.ndarray, Zi: np.ndarray, at: np.ndarray,
               held: np.ndarray) -> np.ndarray:
    """Each row of q (a point on the support for token i at `at`) moved to the nearest point, in the p-weighted
    norm, of the plane A q = A p with q_i = 0: Z diag(p) Z^T = I, r = Z (q - p), q_l -= p_l Z_l . (r + Z_i p_i
    (Z_i . r) / held) with held = 1 - p_i K_ii (Sherman-Morrison: q_i held at 0). In q's precision."""
    r = (q - p) @ Z.T
    r += Zi * (p[at] * np.einsum("ij,ij->i", Zi, r) / held)[:, None]
    moved = q - p * (r @ Z)
    moved[np.arange(len(q)), at] = 0.0
    return moved
