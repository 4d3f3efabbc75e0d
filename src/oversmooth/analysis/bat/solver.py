"""The BAT solver: which tokens of an output p the bottleneck W can zero, each answer proved (the package's
docstring has the method). `BATSolver.reject_set` runs the ways of deciding tokens in order, each on the tokens the
last left: the screen and the repairs; where A has more than DESCENT_ROWS rows the alternating projections, the dual
descent and the polish; then HiGHS's LPs for whatever is left."""

from __future__ import annotations

from dataclasses import replace

import highspy
import numpy as np

from oversmooth.analysis.bat import descent, lp, polish, projections, repair, screen, settings
from oversmooth.analysis.bat.polytope import Polytope, row_basis
from oversmooth.analysis.bat.result import BATResult
from oversmooth.analysis.bat.settings import TBATSettings


class BATSolver:
    """The BAT-reject set of one model's outputs, position after position."""

    def __init__(self, W: np.ndarray, settings: TBATSettings = TBATSettings(), basis: np.ndarray | None = None):
        """`basis`: `row_basis(W, settings.rank_tol)` where the caller has it (over 49,152 tokens at k = 576 its
        SVD takes about 7 s)."""
        self.settings = settings
        self.V = W.shape[0]
        self.Q = row_basis(np.asarray(W, dtype=np.float64), settings.rank_tol) if basis is None else basis
        self.full_rank = self.Q.shape[0] == self.V
        self.highs = self._model_lp()

    def _model_lp(self) -> highspy.Highs | None:
        """One HiGHS LP over every token for the whole model, up to FULL_LP_COLUMNS tokens (none at full rank, where
        no LP is needed); None above it, where each position builds its own."""
        if self.full_rank or self.V > settings.FULL_LP_COLUMNS:
            return None
        return lp.build_lp(self.Q, np.arange(self.V), self.settings.feasibility_tol)

    def descends(self) -> bool:
        """Whether the alternating projections, the dual descent and the polish settle what the screen leaves (A has
        more than DESCENT_ROWS rows and no LP holds every token), before any LP."""
        return self.highs is None and len(self.Q) > settings.DESCENT_ROWS

    def polytope(self, p: np.ndarray, settings: TBATSettings | None = None) -> Polytope:
        """P for output p (float64), under the solver's settings or `settings`."""
        return Polytope(self.Q, p, self.settings if settings is None else settings)

    def reject_set(self, p: np.ndarray, asked: np.ndarray | None = None,
                   threshold: float | None = None) -> BATResult:
        """The BAT-rejected tokens of output p (a probability vector over V tokens), at the settings' threshold or
        `threshold` (a sampler's, which may change from position to position: the row basis does not depend on it).
        With `asked` (token ids), of those tokens alone, as a sampler asks about the tokens it draws: each ends
        rejected (min q_i <= zero_tol: a checked witness, an LP's checked q with q_i <= zero_tol, or u_i <= zero_tol)
        or not (a certificate, an LP's optimum above zero_tol, or p_i above the threshold), or the result failed; the
        tokens not asked are not rejected."""
        p = np.asarray(p, dtype=np.float64)
        s = self.settings if threshold is None else replace(self.settings, threshold=threshold)
        # At full rank q = p is the only point, so the answer is exact: the tokens with p_i = 0, and TBAT is 0. Below
        # it the LPs' answers hold to zero_tol, so a token with u_i <= zero_tol counts as rejected (mass <= 1e-9).
        if self.full_rank:
            return BATResult(p == 0, stats={"full_rank": True})
        P = self.polytope(p, s)
        # Every q in P has q_i <= u_i: where u_i <= zero_tol, q = p itself is a witness (mass 0 to TBAT's precision)
        considered = True if asked is None else asked_mask(self.V, asked)
        zero = (P.u <= s.zero_tol) & considered
        undecided = (p <= s.threshold + 1e-12) & ~zero & considered
        rejected = zero.copy()
        result = BATResult(rejected)
        if undecided.any():
            result.stats["repaired"], Z = self.screen_and_repair(P, undecided, rejected)
            result.stats["screen_rejected"] = int(rejected.sum() - zero.sum())  # the repaired among them
            if Z is not None and undecided.any() and self.descends():
                result.stats["projected"] = projections.project(P, Z, undecided, rejected)
                floor = np.inf if asked is not None and settings.ASKED_POLISH_ONLY else None
                result.stats["descended"], directions = descent.descend(P, Z, undecided, rejected, floor)
                result.stats["polished"] = sum(polish.polish(P, i, directions[i], undecided, rejected)
                                               for i in sorted(directions, key=lambda i: -p[i]) if undecided[i])
        if not undecided.any():
            return result
        position_lp = self.position_lp(P, undecided, asked is not None)
        lp.solve_position(position_lp, result, undecided, rejected)
        result.stats["tail_vertices"] = len(position_lp.vertices)
        return result

    def screen_and_repair(self, P: Polytope, undecided: np.ndarray,
                          rejected: np.ndarray) -> tuple[int, np.ndarray | None]:
        """The screen's moves in proportion to p, then p^1.5 and p^2 for the tokens those left, then for the tokens
        left the repairs of the moves (w = p, then p^1.5) that left the box; where the descent follows, w = p alone
        (DENSE_POWERS); where one LP holds every token, no repair (in place). Returns how many tokens the repairs
        rejected, and the whitened Z for w = p where the repairs used it (the descent's), else None."""
        if self.descends():
            moves = repairs = settings.DENSE_POWERS
        else:
            moves, repairs = settings.SCREEN_POWERS, settings.REPAIR_POWERS if self.highs is None else ()
        whitened = screen.screen(P, moves, repairs, undecided, rejected)
        return repair.repair_left(P, whitened, repairs, undecided, rejected), whitened.get(1.0)

    def position_lp(self, P: Polytope, undecided: np.ndarray, few: bool = False) -> lp.PositionLP:
        """The model's LP over every token, or over a large vocabulary one over the undecided and most probable
        (`few`: a sampler's few asked tokens, with ASKED_FREE_COLUMNS most probable)."""
        if self.highs is not None:
            return lp.PositionLP(self.highs, P, np.arange(self.V))
        free = lp.free_tokens(P, undecided, settings.ASKED_FREE_COLUMNS if few else 0)
        return lp.PositionLP(lp.build_lp(self.Q, free, self.settings.feasibility_tol, convexity=True), P, free)


def asked_mask(V: int, asked: np.ndarray) -> np.ndarray:
    """The asked tokens (ids) as a boolean mask over the V tokens."""
    mask = np.zeros(V, dtype=bool)
    mask[np.asarray(asked, dtype=np.int64)] = True
    return mask
