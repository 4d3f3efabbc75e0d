"""The screen: tokens settled without an LP, by a move of the other tokens' mass that is a witness, or the
least-squares direction that is a certificate.

Move every other token's mass in proportion to p: q = p + d with d_i = -p_i and d_l = a p_l K_li for l != i, where
K = Q^T M^+ Q, M = Q diag(p) Q^T and a = p_i / (1 - p_i K_ii). Then A q = A p (sum over l of p_l Q_l K_li =
M M^+ Q_i = Q_i), q_i = 0, and q is in [0, u] iff -1 <= a K_li <= c for every l != i with p_l > 0: a witness, tested
with room for rounding, one column of K per token (the least-norm q with q_i = 0 in the p-weighted norm). K_li is
bounded by Cauchy-Schwarz (|K_li| <= sqrt(K_ll K_ii)) outside the heaviest l, then computed for the tokens the bound
leaves; the tokens left try the same move with p^1.5 and p^2 in place of p (w: q_l = p_l + a w_l K_li,
a = p_i / (1 - w_i K_ii), K from M = Q diag(w) Q^T; where the descent follows, w = p only: DENSE_POWERS). Over a real
LM's 49,152 tokens it rejects all but a few dozen at k = 64 (under a second) and all but about 500 at k = 576 (about
4 s). K_(., i) / K_ii, the least-squares direction, is a certificate candidate for token i."""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.polytope import Polytope, dual_bounds


def screen(P: Polytope, powers: tuple[float, ...], kept: tuple[float, ...], undecided: np.ndarray,
           rejected: np.ndarray) -> dict[float, np.ndarray]:
    """Reject the undecided tokens whose move is a witness, accept those whose least-squares direction is a
    certificate (in place; the module's docstring has the test): the move in proportion to p^power for each of
    `powers`, each for the tokens the last left. Returns the whitened Z of each power of `kept` that ran (for the
    repairs and, w = p, the descent)."""
    p, u, support = P.p, P.u, P.support  # u > zero_tol > 0 for every undecided token
    whitened_kept = {}
    for power in powers:
        candidates = np.flatnonzero(undecided)
        if not len(candidates):
            break
        Z, K, miss = whitened(P, p[support] ** power, candidates)
        if power in kept:  # kept for the repair: the same Z
            whitened_kept[power] = Z
        at = np.searchsorted(support, candidates)
        ratio = p[support] ** (power - 1)  # w_l / p_l
        if power == 1 and len(support) * len(candidates) > settings.SCREEN_VALUES:  # else exact blocks do it all
            bounded_pass(P, Z, K, at, candidates, miss, undecided, rejected)
        left = np.flatnonzero(undecided[candidates])  # the exact pass, most probable first
        left = left[np.argsort(-p[candidates[left]], kind="stable")][: settings.EXACT_SCREEN]
        step = max(1, settings.SCREEN_VALUES // len(support))
        for start in range(0, len(left), step):
            chunk = left[start : start + step]
            chunk = chunk[undecided[candidates[chunk]]]
            if not len(chunk):
                continue
            block = Z.T @ Z[:, at[chunk]]  # (support, chunk): K_li
            if power == 1:  # K_(., i) / K_ii: the least-squares certificate direction
                bounds = dual_bounds(block.T / K[at[chunk]][:, None], p[support], u[support])
                undecided[support[bounds > P.settings.certificate_margin]] = False
            block *= ratio[:, None]
            block[at[chunk], np.arange(len(chunk))] = 0.0  # the move leaves token i itself out
            own = p[candidates[chunk]] ** power * K[at[chunk]]
            size = np.sqrt(K[at[chunk]] * (K * ratio**2).max())
            reject_moved(P, candidates[chunk], own, block.max(0), block.min(0), size, miss[chunk], undecided,
                         rejected)
    return whitened_kept


def whitened(P: Polytope, w: np.ndarray, candidates: np.ndarray):
    """Z with Z^T Z = K = Q^T M^+ Q on the support, M = Q diag(w) Q^T inverted on its eigenvalues above largest /
    SCREEN_CONDITION; K's diagonal; each candidate Q_i's norm outside the range kept (the move's miss)."""
    Qs = P.Q if len(P.support) == P.V else P.Q[:, P.support]  # no copy where every token has mass
    X = Qs * np.sqrt(w)
    eigenvalues, vectors = np.linalg.eigh(X @ X.T)  # X X^T: NumPy's symmetric product, half a general one's work
    kept = eigenvalues > eigenvalues[-1] / settings.SCREEN_CONDITION
    Z = np.ascontiguousarray((vectors[:, kept] / np.sqrt(eigenvalues[kept])).T) @ Qs
    miss = np.linalg.norm(vectors[:, ~kept].T @ P.Q[:, candidates], axis=0) if not kept.all() else \
        np.zeros(len(candidates))
    return Z, np.einsum("ij,ij->j", Z, Z), miss


def bounded_pass(P: Polytope, Z, K, at, candidates, miss, undecided, rejected) -> None:
    """The screen's first pass: K_li exact for the HEAVY_TOKENS l of largest K_ll, bounded by Cauchy-Schwarz
    (|K_li| <= sqrt(K_ll K_ii)) for the others."""
    n_heavy = min(settings.HEAVY_TOKENS, len(K) - 1)
    heavy = np.argpartition(-K, n_heavy)[:n_heavy]
    light = np.ones(len(K), dtype=bool)
    light[heavy] = False
    row_of = np.full(len(K), -1)
    row_of[heavy] = np.arange(n_heavy)
    spread = np.sqrt(K[at] * K[light].max())
    high, low = spread.copy(), -spread
    step = max(1, settings.SCREEN_VALUES // max(n_heavy, 1))
    for start in range(0, len(at), step):
        columns = at[start : start + step]
        block = Z[:, heavy].T @ Z[:, columns]
        own = row_of[columns] >= 0  # a heavy candidate's own entry: the move leaves it out
        block[row_of[columns][own], np.flatnonzero(own)] = 0.0
        np.maximum(high[start : start + step], block.max(0, initial=-np.inf), out=high[start : start + step])
        np.minimum(low[start : start + step], block.min(0, initial=np.inf), out=low[start : start + step])
    reject_moved(P, candidates, P.p[candidates] * K[at], high, low, np.sqrt(K[at] * K.max()), miss, undecided,
                 rejected)


def reject_moved(P: Polytope, tokens, own, high, low, size, miss, undecided, rejected) -> None:
    """Reject the tokens whose move q = p + d, d_i = -p_i, d_l = a w_l K_li (l != i), a = p_i / (1 - w_i K_ii),
    stays in [0, u]: -1 <= a (w_l / p_l) K_li <= c for every l != i (high, low: the max and min of
    (w_l / p_l) K_li over them; own: w_i K_ii), and reaches A q = A p (to `miss`). Rounding: those within
    SCREEN_ERROR * size of their values, w_i K_ii within SCREEN_ERROR; the test holds for the worst of them."""
    c = P.c
    left = 1 - own - settings.SCREEN_ERROR  # at most the true 1 - w_i K_ii
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(left > settings.SCREEN_ERROR, P.p[tokens] / left, np.inf)
        room = settings.SCREEN_ERROR * size
        fits = ((scale * (high + room) <= c) & (scale * (room - low) <= 1)
                & (scale * miss <= P.settings.feasibility_tol))
    rejected[tokens[fits]] = True
    undecided[tokens[fits]] = False
