"""The dual descent: certificates and witnesses, without an LP, where A has more than DESCENT_ROWS rows.

An accelerated gradient method on the dual of min q_i, smoothed, DESCENT_TOKENS tokens of mass >= DESCENT_FLOOR at a
time; certificates from its iterates, witnesses from its gradient's slopes (`descend_tokens`). At k = 576 under pure
sampling it leaves 8-21 of them at the demo's positions (to the polish); under temperature 0.8 the tokens of smaller
mass (hundreds) go to the polish with their least-squares direction."""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.polytope import Polytope, dual_bounds


def descend(P: Polytope, Z: np.ndarray, undecided: np.ndarray, rejected: np.ndarray,
            floor: float | None = None) -> tuple[int, dict[int, np.ndarray]]:
    """`descend_tokens` on every undecided token of mass >= `floor` (default DESCENT_FLOOR), DESCENT_TOKENS at a
    time, the most probable first (a chunk's certificates settle tokens of later chunks too): how many it rejected,
    and each token's direction it left; a token of smaller mass still undecided after them gets its least-squares
    direction (the descent's first)."""
    p, floor = P.p, settings.DESCENT_FLOOR if floor is None else floor
    order = np.flatnonzero(undecided)
    order = order[np.argsort(-p[order], kind="stable")]
    found, directions = 0, {}
    for start in range(0, len(order), settings.DESCENT_TOKENS):
        tokens = order[start : start + settings.DESCENT_TOKENS]
        tokens = np.sort(tokens[undecided[tokens] & (p[tokens] >= floor)])
        if len(tokens):
            rejected_here, left = descend_tokens(P, Z, tokens, undecided, rejected)
            found += rejected_here
            directions.update(left)
    light = np.sort(order[(p[order] < floor) & undecided[order]])
    for start in range(0, len(light), settings.DESCENT_TOKENS):
        tokens = light[start : start + settings.DESCENT_TOKENS]
        x, _ = least_squares(Z[:, np.searchsorted(P.support, tokens)])
        directions.update(zip(tokens.tolist(), x.T @ Z))
    return found, {i: s for i, s in directions.items() if undecided[i]}


def descend_tokens(P: Polytope, Z: np.ndarray, tokens: np.ndarray, undecided: np.ndarray,
                   rejected: np.ndarray) -> tuple[int, dict[int, np.ndarray]]:
    """Settle undecided tokens by a descent on the dual (in place), `tokens` (sorted) at once: certificates and
    witnesses, each checked over every token; how many it rejected, and for each of `tokens` it left its last
    direction s (on the support).

    Token i is accepted iff some s in A's row space with s_i = 1 has f_i(s) = sum over l != i of
    p_l max(-s_l, c s_l) < p_i (L_i of `dual_bounds`). With s = Z^T z (Z diag(p) Z^T = I: the screen's Z for
    w = p) the descent minimises f_i smoothed (each kink rounded over a width mu_i = DESCENT_SMOOTHING p_i, so
    the gradient is Lipschitz with constant (1 + c) / (2 mu_i)) on the plane z . Z_i = 1, accelerated (FISTA,
    its momentum restarted where it carried a token's iterate uphill: `restarted`), every undecided token at
    once; its iterations take the tokens of mass below DESCENT_TAIL (35,000-44,000 of SmolLM2's at the demo's
    positions, 10-27 % of p_i in f_i at the tokens it left) through a sample in proportion to mass
    (`mass_sample`). The gradient's weights x_l, the kinks' slopes
    (at a check averaged over the iterations since the last one, a token of the sample or of larger mass), lie
    in [-1, c]: a primal point. Z (p x) = nu Z_i + g;
    x - Z^T g meets Z (p x) = nu Z_i exactly, scaled by kappa <= 1 into [-1, c], so that sum_l p_l x_l A_l =
    lam A_i with lam = kappa nu. Where lam >= (1 + c) p_i, gamma = lam - p_i x_i >= p_i and
    q_l = p_l (1 + x_l p_i / gamma) (q_i = 0) is a witness. The smoothing leaves a gap: tokens
    whose optimum lies within a few percent of p_i are left (to the polish), as are those whose bounds a check
    finds no better by DESCENT_STALL."""
    p, u, support, c = P.p, P.u, P.support, P.c
    ps, at = p[support], np.searchsorted(support, tokens)
    heavy = np.flatnonzero(ps >= settings.DESCENT_TAIL)
    tail, weights = mass_sample(ps, np.flatnonzero(ps < settings.DESCENT_TAIL), settings.DESCENT_TAIL_SAMPLE)
    columns = np.concatenate([heavy, tail])
    Zh, ph = Z[:, columns].astype(np.float32), np.concatenate([ps[heavy], weights]).astype(np.float32)
    averaged = np.zeros((len(tokens), len(columns)), dtype=np.float32)  # the slopes since the last check
    Zi = Z[:, at]
    x, norms = least_squares(Zi)
    mu = settings.DESCENT_SMOOTHING * p[tokens]
    y, momentum, active = x.copy(), np.ones(len(tokens)), np.ones(len(tokens), dtype=bool)
    found = 0
    best = np.full((2, len(tokens)), -np.inf)  # each token's best certificate and witness bound, / p_i
    for iteration in range(1, settings.DESCENT_ROUNDS + 1):
        a = np.flatnonzero(active)
        slopes = kink_slopes(y[:, a].astype(np.float32).T @ Zh, mu[a].astype(np.float32), c)
        averaged[a] += slopes / settings.DESCENT_CHECK
        g = (Zh @ (slopes * ph).T).astype(np.float64)
        g -= Zi[:, a] * (np.einsum("ij,ij->j", Zi[:, a], g) / norms[a])  # within the plane
        step = y[:, a] - (2 * mu[a] / (1 + c)) * g
        momentum[a] = restarted(momentum[a], y[:, a], step, x[:, a])
        following = (1 + np.sqrt(1 + 4 * momentum[a] ** 2)) / 2
        y[:, a] = step + ((momentum[a] - 1) / following) * (step - x[:, a])
        x[:, a], momentum[a] = step, following
        if iteration % settings.DESCENT_CHECK:
            continue
        s = x[:, a].T @ Z  # exact, every token
        s /= s[np.arange(len(a)), at[a]][:, None]
        bounds = dual_bounds(s, ps, u[support])
        undecided[support[bounds > P.settings.certificate_margin]] = False
        slopes = kink_slopes(s, mu[a], c)
        slopes[:, columns] = averaged[a]  # the iterations' tokens: their slopes averaged since the last check
        averaged[:] = 0.0
        g = Z @ (slopes * ps).T
        nu = np.einsum("ij,ij->j", Zi[:, a], g) / norms[a]
        slopes -= (g - Zi[:, a] * nu).T @ Z
        kappa = np.minimum(np.where(slopes > c, c / slopes, 1.0), np.where(slopes < -1, -1 / slopes, 1.0)).min(1)
        moves = {}
        for j in np.flatnonzero(kappa * nu >= (1 + c) * p[tokens[a]]):
            i, moved = tokens[a[j]], kappa[j] * slopes[j]
            gamma = kappa[j] * nu[j] - p[i] * moved[at[a[j]]]
            if undecided[i]:
                moves[int(i)] = np.clip(ps * (1 + moved * p[i] / gamma), 0.0, u[support])
        found += P.reject_witnesses(moves, undecided, rejected)
        now = np.vstack([bounds[at[a]], kappa * nu / (1 + c)]) / p[tokens[a]]
        active[a[(now - best[:, a]).max(0) < settings.DESCENT_STALL]] = False  # stalled: left to the polish
        best[:, a] = np.maximum(best[:, a], now)
        active &= undecided[tokens]
        if not active.any():
            break
    left = np.flatnonzero(undecided[tokens])
    return found, dict(zip(tokens[left].tolist(), x[:, left].T @ Z))


def restarted(momentum: np.ndarray, y: np.ndarray, step: np.ndarray, x: np.ndarray) -> np.ndarray:
    """FISTA's momentum with the gradient restart (O'Donoghue and Candes 2015) per column: 1 where the gradient step
    from y (y - step, along the gradient) and the last move (step - x) point the same way, i.e. the momentum
    carried the iterate uphill."""
    uphill = np.einsum("ij,ij->j", y - step, step - x) > 0
    return np.where(uphill, 1.0, momentum)


def least_squares(Zi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's least-squares direction in z (the columns Z_i / K_ii: s = Z^T z = K_(., i) / K_ii, s_i = 1), the
    descent's start, and K_ii = |Z_i|^2."""
    norms = np.einsum("ij,ij->j", Zi, Zi)
    return Zi / norms, norms


def mass_sample(p: np.ndarray, tokens: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """A systematic sample of `tokens` in proportion to their mass p (all of them where they are no more than
    `size`), and the mass each stands for: their total mass cut into `size` strata of equal mass, each stratum's
    middle picks the token it falls on (a token picked k times stands for k strata). Deterministic."""
    mass = np.cumsum(p[tokens])
    if len(tokens) <= size or mass[-1] <= 0:
        return tokens, p[tokens]
    picked = np.minimum(np.searchsorted(mass, (np.arange(size) + 0.5) * mass[-1] / size), len(tokens) - 1)
    at, counts = np.unique(picked, return_counts=True)
    return tokens[at], counts * (mass[-1] / size)


def kink_slopes(s: np.ndarray, mu: np.ndarray, c: float) -> np.ndarray:
    """The slopes of max(-s, c s) with its kink rounded over width mu (per row): in [-1, c]."""
    return (1 + c) / 2 * np.clip(s / mu[:, None], -1, 1) + (c - 1) / 2
