"""The polytope P = {q : A q = A p, 0 <= q <= u} of one output p, and the two kinds of proof every answer rests on.

A = [W^T; 1^T] is held as Q, an orthonormal basis of its rows (r x V: `row_basis`), so that A q = A p iff
Q q = Q p. A witness is a point q of P with q_i = 0: it proves token i rejected, and is checked against every
constraint before it counts (`Polytope.witnesses`). A certificate is a direction s in A's row space with
L_i(s) = p.s - sum_l u_l max(s_l - [l = i], 0) > 0: by weak LP duality min over P of q_i >= L_i(s), so it proves i
accepted (`dual_bounds`)."""

from __future__ import annotations

import numpy as np

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.settings import TBATSettings


def row_basis(W: np.ndarray, rank_tol: float) -> np.ndarray:
    """Orthonormal rows spanning the rows of A = [W^T; 1^T] (r x V)."""
    A = np.vstack([W.T, np.ones(W.shape[0])])
    _, s, vt = np.linalg.svd(A, full_matrices=False)
    return vt[: int((s > rank_tol * s[0]).sum())]


def dual_bounds(S: np.ndarray, p: np.ndarray, u: np.ndarray, chunk: int = 32) -> np.ndarray:
    """max over the rows s of S (each in A's row space, scaled so that the bound is best) of L_i(s), per token i.

    L_i(a s) = a (p.s - u.max(s, 0)) + u_i min(a s_i, 1)^+ is best at a = 1 / s_i for s_i > 0. Rows are taken
    `chunk` at a time, so that the temporaries stay small over a large vocabulary."""
    best = np.full(len(p), -np.inf)
    for start in range(0, len(S), chunk):
        rows = S[start : start + chunk]
        base = rows @ p - np.clip(rows, 0, None) @ u  # (m,)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.maximum(best, np.where(rows > 0, base[:, None] / rows + u[None, :], -np.inf).max(0), out=best)
    return best


class Polytope:
    """P for output p (float64, over the V tokens) under A's row basis Q: u = p / (1 - threshold) = p (1 + c),
    b = Q p (A p in the basis), and the tokens with mass (the support, where every move of the solver lives). Its
    methods check witnesses and settle tokens by proofs; the verdicts are two boolean arrays over the tokens, changed
    in place: `undecided` and `rejected`."""

    def __init__(self, Q: np.ndarray, p: np.ndarray, tbat: TBATSettings):
        self.Q, self.p, self.settings = Q, p, tbat
        self.V = len(p)
        self.u = p / (1 - tbat.threshold)
        self.c = tbat.threshold / (1 - tbat.threshold)
        self.b = Q @ p
        self.support = np.flatnonzero(p > 0)

    def contains(self, q: np.ndarray, tol: float) -> bool:
        """Whether q meets Q q = b and 0 <= q <= u, each to tol (an LP's answer, checked over every token)."""
        return bool(np.abs(self.Q @ q - self.b).max() <= tol and q.min() >= -tol and (q - self.u).max() <= tol)

    def witnesses(self, q_support: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """Which rows q of q_support (q on the support, 0 elsewhere and at its token of `tokens`), inside [0, u],
        meet A q = A p: to the LPs' tolerance and to SCREEN_ERROR of the mass moved (dropping a token of mass below
        the tolerance would otherwise pass without any move; its repair, exact, misses A p by rounding, ~1e-16 p_i).
        Checked over every token, WITNESS_BATCH rows in one product (one pass over A's rows, not one a row)."""
        tol = np.minimum(10 * self.settings.feasibility_tol, settings.SCREEN_ERROR * self.p[tokens])
        found = np.zeros(len(tokens), dtype=bool)
        for start in range(0, len(tokens), settings.WITNESS_BATCH):
            batch = slice(start, start + settings.WITNESS_BATCH)
            q = np.zeros((len(tokens[batch]), self.V))
            q[:, self.support] = q_support[batch]
            q[np.arange(len(q)), tokens[batch]] = 0.0
            found[batch] = np.abs(q @ self.Q.T - self.b).max(1) <= tol[batch]
        return found

    def reject_witnesses(self, moves: dict[int, np.ndarray], undecided: np.ndarray, rejected: np.ndarray) -> int:
        """Reject each token i of `moves` whose q (its move on the support) is a witness (in place); how many."""
        if not moves:
            return 0
        tokens = np.fromiter(moves, dtype=np.int64, count=len(moves))
        good = tokens[self.witnesses(np.stack(list(moves.values())), tokens)]
        rejected[good], undecided[good] = True, False
        return len(good)

    def settle(self, q: np.ndarray, s: np.ndarray, undecided: np.ndarray, rejected: np.ndarray) -> bool:
        """Reject the undecided tokens that q (a point of P, an LP's answer checked) zeroes, accept those that
        direction s certifies (in place); whether any was rejected."""
        newly = undecided & (q <= self.settings.zero_tol)
        rejected |= newly
        undecided &= ~newly
        undecided &= ~(dual_bounds(np.vstack([s, -s]), self.p, self.u) > self.settings.certificate_margin)
        return bool(newly.any())

    def certify(self, undecided: np.ndarray) -> None:
        """Settle as accepted the undecided tokens that a reweighted direction proves (in place): the
        `MAX_DIRECTIONS` most probable undecided tokens, a few at a time."""
        p, u = self.p, self.u
        tokens = np.flatnonzero(undecided)
        if len(tokens) > settings.MAX_DIRECTIONS:
            most = settings.MAX_DIRECTIONS
            tokens = np.sort(tokens[np.argpartition(-p[tokens], most - 1)[:most]])
        chunk = max(1, settings.DIRECTION_VALUES // (self.Q.shape[0] * self.V))
        for start in range(0, len(tokens), chunk):
            bounds = dual_bounds(self.reweighted_directions(tokens[start : start + chunk]), p, u)
            undecided &= ~(bounds > self.settings.certificate_margin)

    def reweighted_directions(self, tokens: np.ndarray, rounds: int = 6) -> np.ndarray:
        """Least-squares directions reweighted towards the dual objective's asymmetric L1 cost
        (u_l - p_l per unit above 0, p_l per unit below), a few rounds, the given tokens at once."""
        if not len(tokens):
            return np.zeros((0, self.V))
        Q, p, u, m = self.Q, self.p, self.u, len(tokens)
        weights = np.broadcast_to(np.maximum(p, 1e-300), (m, self.V))
        directions = []
        for _ in range(rounds):
            M = (Q[None] * weights[:, None, :]) @ Q.T  # (m, r, r)
            M += (1e-12 * np.trace(M, axis1=1, axis2=2) / len(Q) + 1e-300)[:, None, None] * np.eye(len(Q))
            g = np.linalg.solve(M, Q[:, tokens].T[:, :, None])[:, :, 0]  # (m, r)
            S = g @ Q
            S /= S[np.arange(m), tokens][:, None]
            directions.append(S)
            cost = np.where(S > 0, u - p, p)
            weights = np.maximum(cost, 1e-300) / np.maximum(np.abs(S), 1e-6)
        return np.concatenate(directions)
