"""The repairs: witnesses, without an LP, for the tokens whose screen move left the box [0, u].

Pin the tokens a move pushed out of [0, u] at the bound they crossed and move the others again (the least w-weighted
change that keeps A q = A p, by Woodbury on M without the pinned), until none crosses; the q found is clipped to
[0, u] and checked against A q = A p: a witness. At k = 576 they leave tens to a few hundred tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.polytope import Polytope


@dataclass
class Pinned:
    """The repair's pinned tokens for one token i (i first): their support positions and fixed moves d_F."""

    at: list[int]
    values: list[float]
    gram: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # K_FF, grown as tokens are pinned

    def direction(self, Z: np.ndarray, w: np.ndarray) -> np.ndarray | None:
        """Z_F (diag(1 / w_F) - K_FF)^-1 (d_F / w_F): the others move by -w_l Z_l . this; None where the matrix is
        singular (the others cannot make up for the pinned: the repair gives up on the token)."""
        at = np.asarray(self.at)
        ZF, n = Z[:, at], len(self.gram)
        if n < len(at):  # K_FF grows by the tokens pinned last round
            new = ZF.T @ ZF[:, n:]
            self.gram = np.block([[self.gram, new[:n]], [new[:n].T, new[n:]]])
        try:
            y = np.linalg.solve(np.diag(1 / w[at]) - self.gram, np.asarray(self.values) / w[at])
        except np.linalg.LinAlgError:
            return None
        return ZF @ y if np.isfinite(y).all() else None


def repair_left(P: Polytope, whitened: dict[float, np.ndarray], powers: tuple[float, ...], undecided: np.ndarray,
                rejected: np.ndarray) -> int:
    """The repairs of the moves in proportion to p^power for each of `powers` (`whitened`: each one's Z from the
    screen), each for the tokens every plain move and the last repair left (the most probable EXACT_SCREEN of them);
    how many they rejected. Where one LP holds every token (the byte track) its warm-started re-solves (~1 ms) are
    cheaper than repairs that pin most of the tokens: the solver asks for none there."""
    repaired = 0
    for power in powers:
        left = np.flatnonzero(undecided)
        left = left[np.argsort(-P.p[left], kind="stable")][: settings.EXACT_SCREEN]
        if not len(left):
            break
        repaired += repair(P, whitened[power], P.p[P.support] ** power, left, undecided, rejected)
    return repaired


def repair(P: Polytope, Z: np.ndarray, w: np.ndarray, tokens: np.ndarray, undecided: np.ndarray,
           rejected: np.ndarray) -> int:
    """Reject the tokens whose move, repaired, is a witness (in place); how many.

    The screen's move for token i leaves [0, u] at a few tokens; pin those at the bound they crossed and move
    the others again, the least w-weighted change that keeps A q = A p: with the pinned set F (i among them) at
    d_F, d_l = -w_l Z_l . Z_F (diag(1 / w_F) - K_FF)^-1 (d_F / w_F) (Woodbury on M without the pinned), until no
    token crosses its bound, more than REPAIR_FIXED are pinned, or REPAIR_ROUNDS pass. Each q so found is
    clipped to [0, u] and checked against A q = A p over every token: a witness, like an LP's."""
    p, u, support = P.p, P.u, P.support
    at_of = np.full(len(p), -1)
    at_of[support] = np.arange(len(support))
    low, high = -p[support], P.c * p[support]  # d's bounds on the support
    found = 0
    step = max(1, settings.SCREEN_VALUES // len(support))
    for start in range(0, len(tokens), step):  # a chunk of tokens through every round: K_FF's memory stays small
        pinned = {int(i): Pinned([at_of[i]], [-p[i]]) for i in tokens[start : start + step]}
        for _ in range(settings.REPAIR_ROUNDS):
            if not pinned:
                break
            directions = {i: y.direction(Z, w) for i, y in pinned.items()}
            for i in [i for i, y in directions.items() if y is None]:
                del pinned[i], directions[i]
            if not directions:
                break
            D = -(Z.T @ np.stack(list(directions.values()), axis=1)) * w[:, None]
            moves = {}
            for i, d in zip(list(directions), D.T):
                at = np.asarray(pinned[i].at)
                d[at] = pinned[i].values
                crossed = (d < low) | (d > high)
                crossed[at] = False
                crossed = np.flatnonzero(crossed)
                if len(crossed) and len(at) + len(crossed) <= settings.REPAIR_FIXED:
                    pinned[i].at.extend(crossed.tolist())
                    pinned[i].values.extend(np.clip(d[crossed], low[crossed], high[crossed]).tolist())
                    continue
                del pinned[i]
                if not len(crossed):
                    moves[i] = np.clip(p[support] + d, 0.0, u[support])
            found += P.reject_witnesses(moves, undecided, rejected)
    return found
