"""TBAT, the total BAT-reject set mass (thesis §4.1.6, appendix D), exact and fast.

For a model output p over V tokens (bytes, or the token track's 49,152) and the matrix W (V x k) that maps the
head's input to logits, token i is BAT-rejected iff some q exists with

    q_i = 0,  sum(q) = 1,  0 <= q <= u = p / (1 - threshold),  W^T q = W^T p,

and TBAT is the mass p puts on the rejected tokens. With A = [W^T; 1^T] the constraints are A q = A p,
0 <= q <= u: a polytope P that contains p. Q is an orthonormal basis of A's rows (r x V), Q_i its column i, and
c = threshold / (1 - threshold), so that u = p (1 + c). Facts the solver uses:

- rank(A) = V: q = p is the only point of P, so nothing with p_i > 0 is rejected (no LP at all).
- i can be rejected only if sum over j != i of u_j >= 1, i.e. p_i <= threshold.
- The screen (no LP). Move every other token's mass in proportion to p: q = p + d with d_i = -p_i and
  d_l = a p_l K_li for l != i, where K = Q^T M^+ Q, M = Q diag(p) Q^T and a = p_i / (1 - p_i K_ii). Then
  A q = A p (sum over l of p_l Q_l K_li = M M^+ Q_i = Q_i), q_i = 0, and q is in [0, u] iff -1 <= a K_li <= c for
  every l != i with p_l > 0: a witness, tested with room for rounding, one column of K per token (the least-norm q with q_i = 0
  in the p-weighted norm). K_li is bounded by Cauchy-Schwarz (|K_li| <= sqrt(K_ll K_ii)) outside the heaviest l,
  then computed for the tokens the bound leaves; the tokens left try the same move with p^1.5 and p^2 in place of p
  (w: q_l = p_l + a w_l K_li, a = p_i / (1 - w_i K_ii), K from M = Q diag(w) Q^T; where the descent follows, w = p
  only: DENSE_POWERS). Over a real LM's 49,152 tokens it rejects all but a few dozen at k = 64 (under a second) and
  all but about 500 at k = 576 (about 4 s).
- The repair (no LP), for the tokens every move left: pin the tokens a move pushed out of [0, u] at the bound they
  crossed and move the others again (the least w-weighted change that keeps A q = A p, by Woodbury on M without the
  pinned), until none crosses; the q found is clipped to [0, u] and checked against A q = A p: a witness. At
  k = 576 it leaves tens to a few hundred tokens.
- Alternating projections (no LP; where the descent follows), for the tokens the repairs left: from p with q_i = 0,
  the nearest point of the plane A q = A p, q_i = 0 in the p-weighted norm, clipped into [0, u] shrunk by a margin,
  and again (`_project`); a plane point inside [0, u] is a witness, checked. At k = 576 under pure sampling they
  reject 94-200 tokens a position at the demo's positions in 4-8 s, each of which the descent took 400-600
  iterations to reject.
- The dual descent (no LP; where A has more than DESCENT_ROWS rows): an accelerated gradient method on the dual of
  min q_i (below), smoothed, DESCENT_TOKENS tokens of mass >= DESCENT_FLOOR at a time; certificates from its
  iterates, witnesses from its gradient's slopes (`_descend`). At k = 576 under pure sampling it leaves 8-21 of them
  at the demo's positions; under temperature 0.8 the tokens of smaller mass (hundreds) go to the polish. The polish
  (`_polish`) settles each of those by min q_i over parts of P chosen from the descent's direction, by a dense
  interior-point method (A's rows made orthonormal first: tokens of mass 1e-15 beside 0.1 would otherwise condition
  it), freeing the tail tokens that carry the duality gap until the token is settled (POLISH_ROUNDS at most): at
  k = 576 it left none for HiGHS at the positions measured (a token left gets at most DENSE_PRICING_ROUNDS rounds of
  LPs, then its position fails).
- For any s in the row space of A, min over P of q_i >= L_i(s) = p.s - sum_l u_l max(s_l - [l = i], 0)
  (weak LP duality). L_i(s) > 0 proves i accepted (a certificate). Candidates for s: the least-squares direction
  K_(., i) / K_ii (the screen computes it), reweighted directions, and the dual solution of every LP solved.
- A vertex q of P with q_i = 0 proves i rejected (a witness; it is checked against the constraints).
  Minimising sum over undecided i of q_i / u_i gives vertices that zero many tokens at once; the tokens left
  are settled by min q_i, one LP each.
- Column generation over a large vocabulary. Its LP frees the undecided and the most probable tokens; every other
  token (the tail) moves only as q_T = p_T + sum_k theta_k (v_k - p_T), theta >= 0, sum theta <= 1, with v_k
  vertices of the tail's box [0, u_T] (Dantzig-Wolfe columns): every such q is in P, so a witness of this LP is a
  witness of P. Its dual s is a certificate of P when L_i(s) > margin over every token; where it is not, the vertex
  the dual asks for (each tail token at the bound its reduced cost wants) joins the LP, until a witness, a
  certificate, or no vertex improves (then the LP's optimum is P's).

Up to FULL_LP_COLUMNS tokens (the byte track) one HiGHS LP per model is built once and re-solved with new bounds
and costs, each solve warm-started from the last basis; above it each position builds its own smaller LP.
A solver failure marks the position failed (TBAT NaN), never accept or reject.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import highspy
import numpy as np
import pyarrow as pa
import scipy.linalg
import threadpoolctl

from oversmooth.core.io import write_parquet
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import SampledRows

log = get_logger("tbat")


FULL_LP_COLUMNS = 2048  # up to this vocabulary one LP over every token per model; above it, column generation
FREE_COLUMNS = 512  # a large vocabulary's LP frees its undecided tokens and at least this many most probable ones,
FREE_PER_ROW = 2  # and at least this many per row of A: with no more than rows, the free tokens alone cannot move q
HEAVY_TOKENS = 1024  # the screen's first pass computes K_li for these l (largest K_ll), bounds the others
EXACT_SCREEN = 4096  # undecided tokens (most probable first) whose move and direction are computed over every token
SCREEN_VALUES = 2**23  # a block of K holds about this many values (64 MB)
MAX_PRICING_ROUNDS = 1000  # tail vertices added for one token before the position is marked failed
DENSE_PRICING_ROUNDS = 40  # the same where A has more than DESCENT_ROWS rows (3-7 s an LP at k = 576: ~4 minutes)
MAX_DIRECTIONS = 256  # tokens given reweighted certificate directions (one LP over every token only)
DIRECTION_VALUES = 2**21  # a chunk of reweighted directions holds about this many values (r x V per token), 16 MB
SCREEN_POWERS = (1.0, 1.5, 2.0)  # the screen's moves in proportion to p^power, each for the tokens the last left
SCREEN_CONDITION = 1e8  # the screen inverts M on its eigenvalues above largest / this (K exact to ~1e-8 relative)
SCREEN_ERROR = 1e-7  # the screen's bound on K's rounding error, relative to sqrt(K_ll K_ii) (and on p_i K_ii)
REPAIR_POWERS = (1.0, 1.5)  # the repairs' moves, after every plain move, for the tokens those left
DENSE_POWERS = (1.0,)  # the moves and repairs where the descent follows (A has more than DESCENT_ROWS rows): at
# SmolLM2's head the others rejected 0-9 tokens at the demo's 4 positions for 3 s each, 188-391 at 6 of 8 others
REPAIR_FIXED = 256  # the repair gives up on a token once its move would pin more tokens than this at a bound
REPAIR_ROUNDS = 12  # rounds of pinning (each one product Z^T R over the tokens still in repair)
WITNESS_BATCH = 64  # the screen's and the descent's candidate witnesses checked in one product (64 x V values)
PROJECTION_ROUNDS = 40  # where the descent runs, the tokens the repairs left first get this many alternating
PROJECTION_MARGIN = 0.05  # projections between the plane (A q = A p, q_i = 0) and [m p, u - m p], m this;
PROJECTION_STALL = 5  # a token leaves them once its mass outside [0, u] has not halved in this many rounds
DESCENT_ROWS = 100  # the dual descent runs (a large vocabulary, after the repairs) where A has more rows than this;
# with fewer, the LPs it would save take about as long as it does (k = 64: 0.05 s each)
DESCENT_ROUNDS = 1000  # its iterations at most
DESCENT_CHECK = 100  # its certificates and witnesses are checked every this many iterations (3 products of
# tokens x r x V each)
DESCENT_SMOOTHING = 0.2  # its smoothing width for token i: this times p_i (in units of s_i = 1)
DESCENT_TAIL = 1e-7  # its iterations take the tokens of smaller mass through a sample (its checks take every token)
DESCENT_TAIL_SAMPLE = 2048  # of this many of them, in proportion to mass (`mass_sample`)
DESCENT_STALL = 0.01  # a token leaves it once a check finds neither its certificate's nor its witness's bound (in
# units of p_i) this much better than at every earlier check
DESCENT_TOKENS = 256  # it takes the undecided tokens this many at a time, the most probable first,
DESCENT_FLOOR = 1e-6  # those of this mass or more: it settled none of 280 below (temperature 0.8), at 30 s a chunk
POLISH_KINKS = 1000  # a token the descent leaves gets an LP that frees these tokens nearest its direction's kinks,
POLISH_FLOOR = 1e-6  # among those of at least this mass (besides the free tokens of the column generation's LPs)
POLISH_ROUNDS = 6  # the polish's LPs per token at most, each freeing POLISH_KINKS more tokens
POLISH_ITERATIONS = 80  # the interior-point method's iterations at most
POLISH_STALL = 4  # and it stops once optimal but for a primal residual that has not halved in this many
ROW_RANK = 1e-12  # it makes A's rows orthonormal unless R's diagonal spans more than 1 / this


@dataclass(frozen=True)
class TBATSettings:
    """The definition's threshold (e^delta = 1 / (1 - threshold); the thesis code used 0.2) and the
    numerical tolerances."""

    threshold: float = 0.2
    zero_tol: float = 1e-9  # q_i at or below this counts as 0
    certificate_margin: float = 1e-9  # a dual bound above this proves min q_i > 0
    feasibility_tol: float = 1e-9  # HiGHS primal/dual feasibility, and the witness check
    rank_tol: float = 1e-10  # singular values below rank_tol * largest count as 0

    def __post_init__(self):
        if not 0 < self.threshold < 1:
            raise ValueError(f"tbat.threshold must be in (0, 1), got {self.threshold}")


@dataclass
class BATResult:
    rejected: np.ndarray  # bool (V,)
    failed: bool = False
    lp_solves: int = 0
    stats: dict = field(default_factory=dict)

    def tbat(self, p: np.ndarray) -> float:
        return float("nan") if self.failed else float(p[self.rejected].sum())


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


class PositionLP:
    """min cost.q over P for one position: HiGHS over the `free` tokens; every other token (the tail) at
    q_T = p_T + sum_k theta_k (v_k - p_T), theta >= 0, sum theta <= 1, with v_k vertices of the tail's box
    [0, u_T] (Dantzig-Wolfe columns, one row more): every q so made is in P, and pricing adds the vertex that the
    dual asks for, so that the LP's optimum tends to P's."""

    def __init__(self, highs: highspy.Highs, Q: np.ndarray, p: np.ndarray, u: np.ndarray, free: np.ndarray,
                 settings: TBATSettings):
        self.highs, self.Q, self.p, self.u, self.settings = highs, Q, p, u, settings
        self.free = free
        self.tail = np.ones(len(p), dtype=bool)
        self.tail[free] = False
        self.every_token = not self.tail.any()
        self.b = Q @ p
        self.vertices: list[np.ndarray] = []  # per column: the tail tokens at u_l (the others at 0)
        self.rhs = self.b if self.every_token else Q[:, free] @ p[free]  # the free tokens' share of A p
        r, n = Q.shape[0], len(free)
        self._columns = np.arange(n, dtype=np.int32)
        self.highs.changeColsBounds(n, self._columns, np.zeros(n), u[free])
        self.highs.changeRowsBounds(r, np.arange(r, dtype=np.int32), self.rhs, self.rhs)

    def solve(self, cost: np.ndarray, result: BATResult) -> tuple[np.ndarray, np.ndarray] | None:
        """The optimal q (over every token, checked against P) and the dual direction s = Q^T y, or None (the
        result failed). `cost` is over the free tokens; the tail costs nothing. A solve warm-started from the last
        basis that fails (its status, or a q outside P: rounding that the warm start carried) is solved again
        from scratch; only a second failure fails the position."""
        n = len(self.free)
        self.highs.changeColsCost(n, self._columns, cost if self.every_token else cost[self.free])
        for attempt in range(2):
            if attempt:
                self.highs.clearSolver()
            run_status = self.highs.run()
            result.lp_solves += 1
            model_status = self.highs.getModelStatus()
            if run_status != highspy.HighsStatus.kOk or model_status != highspy.HighsModelStatus.kOptimal:
                status = f"{run_status}, {self.highs.modelStatusToString(model_status)}"
                continue
            solution = self.highs.getSolution()
            q = self._witness(np.asarray(solution.col_value))
            if q is not None:
                self._convexity_dual = 0.0 if self.every_token else solution.row_dual[-1]
                return q, self.Q.T @ np.asarray(solution.row_dual[: len(self.Q)])  # HiGHS: reduced costs = c - A^T y
            status = "witness outside the polytope"  # it proves nothing
        result.failed = True
        result.stats["status"] = status
        return None

    def _witness(self, values: np.ndarray) -> np.ndarray | None:
        """q over every token from the LP's columns (free tokens, then tail vertices), or None if not in P."""
        n = len(self.free)
        if self.every_token:
            q = values
        else:
            q = self.p.copy()
            q[self.free] = values[:n]
        for theta, at_top in zip(values[n:], self.vertices):
            if theta > 0:
                q[self.tail] += theta * (np.where(at_top, self.u, 0.0) - self.p)[self.tail]
        return q if _in_polytope(self.Q, q, self.b, self.u, 10 * self.settings.feasibility_tol) else None

    def price(self, s: np.ndarray) -> bool:
        """Add the tail vertex with the most negative reduced cost under dual s (every tail token at the bound its
        reduced cost -s_l asks for); False if none improves, i.e. the LP's optimum is P's."""
        if self.every_token:
            return False
        at_top = self.tail & (s > 0)
        move = np.where(at_top, self.u, 0.0) - self.p
        move[~self.tail] = 0.0
        if -(s @ move) - self._convexity_dual >= -self.settings.feasibility_tol:
            return False
        r = self.Q.shape[0]
        self.highs.addCols(1, np.zeros(1), np.zeros(1), np.ones(1), r + 1, np.zeros(1, dtype=np.int32),
                           np.arange(r + 1, dtype=np.int32), np.append(self.Q @ move, 1.0))
        self.vertices.append(at_top)
        return True


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


class BATSolver:
    """The BAT-reject set of one model's outputs, position after position."""

    def __init__(self, W: np.ndarray, settings: TBATSettings = TBATSettings(), basis: np.ndarray | None = None):
        """`basis`: `row_basis(W, settings.rank_tol)` where the caller has it (over 49,152 tokens at k = 576 its
        SVD takes about 7 s)."""
        self.settings = settings
        self.V = W.shape[0]
        self.Q = row_basis(np.asarray(W, dtype=np.float64), settings.rank_tol) if basis is None else basis
        self.full_rank = self.Q.shape[0] == self.V
        self.highs = self._build_lp(np.arange(self.V)) if not self.full_rank and self.V <= FULL_LP_COLUMNS else None

    def _descends(self) -> bool:
        """Whether the dual descent and the polish settle what the screen leaves (A has more than DESCENT_ROWS
        rows and no LP holds every token), before any LP."""
        return self.highs is None and len(self.Q) > DESCENT_ROWS

    def _build_lp(self, columns: np.ndarray, convexity: bool = False) -> highspy.Highs:
        """HiGHS over `columns` of A's row basis (bounds and right-hand side set by PositionLP), with the tail's
        convexity row (sum theta <= 1) where some tokens are not columns."""
        r, n, s = self.Q.shape[0], len(columns), self.settings
        h = highspy.Highs()
        for option, value in (
            ("output_flag", False), ("presolve", "off"), ("threads", 1),
            ("simplex_scale_strategy", 0),  # the rows are orthonormal; rescaling at every re-solve cost ~30 %
            ("primal_feasibility_tolerance", s.feasibility_tol), ("dual_feasibility_tolerance", s.feasibility_tol),
        ):
            h.setOptionValue(option, value)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, r + convexity
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.zeros(n), np.zeros(n), np.ones(n)
        lp.row_lower_ = np.append(np.zeros(r), [-np.inf] * convexity)
        lp.row_upper_ = np.append(np.zeros(r), [1.0] * convexity)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.arange(0, n * r + 1, r)
        lp.a_matrix_.index_ = np.tile(np.arange(r), n)
        lp.a_matrix_.value_ = np.ascontiguousarray(self.Q[:, columns].T).reshape(-1)
        h.passModel(lp)
        return h

    def reject_set(self, p: np.ndarray) -> BATResult:
        """The BAT-rejected tokens of output p (a probability vector over V tokens)."""
        p = np.asarray(p, dtype=np.float64)
        s = self.settings
        u = p / (1 - s.threshold)
        # Every q in P has q_i <= u_i: where u_i <= zero_tol, q = p itself is a witness (mass 0 to TBAT's precision)
        zero = u <= s.zero_tol
        # At full rank q = p is the only point, so the answer is exact: the tokens with p_i = 0, and TBAT is 0. Below
        # it the LPs' answers hold to zero_tol, so a token with u_i <= zero_tol counts as rejected (mass <= 1e-9).
        if self.full_rank:
            return BATResult(p == 0, stats={"full_rank": True})
        undecided = (p <= s.threshold + 1e-12) & ~zero
        rejected = zero.copy()
        result = BATResult(rejected)
        if undecided.any():
            result.stats["repaired"], Z = self._screen(p, u, undecided, rejected)
            result.stats["screen_rejected"] = int(rejected.sum() - zero.sum())  # the repaired among them
            if Z is not None and undecided.any() and self._descends():
                support = np.flatnonzero(p > 0)
                result.stats["projected"] = self._project(Z, support, p, u, undecided, rejected)
                result.stats["descended"], directions = self._descend(Z, support, p, u, undecided, rejected)
                result.stats["polished"] = sum(self._polish(i, support, directions[i], p, u, undecided, rejected)
                                               for i in sorted(directions, key=lambda i: -p[i]) if undecided[i])
        if not undecided.any():
            return result
        lp = self._position_lp(p, u, undecided)
        self._solve_position(lp, result, p, u, undecided, rejected)
        result.stats["tail_vertices"] = len(lp.vertices)
        return result

    def _solve_position(self, lp: PositionLP, result: BATResult, p, u, undecided, rejected) -> None:
        """Settle the undecided tokens by LPs (in place), or stop at the first failure (result failed)."""
        refined = False
        while undecided.any():
            weights = np.where(undecided, u.min(where=undecided, initial=1.0) / np.where(undecided, u, 1.0), 0.0)
            found = lp.solve(weights, result)  # sum of q_i / u_i over the undecided, scaled to max 1
            if found is None:
                return
            if self._settle(*found, p, u, undecided, rejected):
                continue
            if not refined and lp.every_token:  # the witnesses dried up: the rest is mostly accepted
                refined = True
                self._certify(undecided, p, u)
            for i in np.flatnonzero(undecided):
                if undecided[i] and not self._decide(i, lp, result, p, u, undecided, rejected):
                    return

    def _position_lp(self, p: np.ndarray, u: np.ndarray, undecided: np.ndarray) -> PositionLP:
        """The model's LP over every token, or over a large vocabulary one over the undecided and most probable."""
        if self.highs is not None:
            return PositionLP(self.highs, self.Q, p, u, np.arange(self.V), self.settings)
        free = self._position_lp_free(p, undecided)
        return PositionLP(self._build_lp(free, convexity=True), self.Q, p, u, free, self.settings)

    def _position_lp_free(self, p: np.ndarray, undecided: np.ndarray) -> np.ndarray:
        """A large vocabulary's free tokens: the undecided and the most probable (sorted)."""
        free, n_free = undecided.copy(), min(self.V - 1, max(FREE_COLUMNS, FREE_PER_ROW * self.Q.shape[0]))
        free[np.argpartition(-p, n_free)[:n_free]] = True
        return np.flatnonzero(free)

    def _settle(self, q: np.ndarray, s: np.ndarray, p, u, undecided: np.ndarray, rejected: np.ndarray) -> bool:
        """Reject the undecided tokens that vertex q zeroes, accept those that direction s certifies (in place);
        whether any was rejected."""
        newly = undecided & (q <= self.settings.zero_tol)
        rejected |= newly
        undecided &= ~newly
        undecided &= ~(dual_bounds(np.vstack([s, -s]), p, u) > self.settings.certificate_margin)
        return bool(newly.any())

    def _decide(self, i: int, lp: PositionLP, result: BATResult, p, u, undecided, rejected) -> bool:
        """Settle token i by min q_i, adding tail vertices until a witness, a certificate or P's optimum; False if
        the LP failed."""
        cost = np.zeros(self.V)
        cost[i] = 1.0
        rounds = MAX_PRICING_ROUNDS if len(self.Q) <= DESCENT_ROWS else DENSE_PRICING_ROUNDS
        for _ in range(rounds):
            found = lp.solve(cost, result)
            if found is None:
                return False
            self._settle(*found, p, u, undecided, rejected)
            if not undecided[i]:
                return True
            if not lp.price(found[1]):  # the LP's optimum is P's: min q_i > zero_tol accepts i
                undecided[i] = False
                return True
        result.failed = True
        result.stats["status"] = f"token {i} undecided after {rounds} pricing rounds"
        return False

    def _screen(self, p: np.ndarray, u: np.ndarray, undecided: np.ndarray,
                rejected: np.ndarray) -> tuple[int, np.ndarray | None]:
        """Reject the undecided tokens whose move is a witness, accept those whose least-squares direction is a
        certificate (in place; the module's docstring has the test). The move in proportion to p first, then for
        the tokens it leaves in proportion to p^1.5 and p^2 (w = p^power: q_l = p_l + a w_l K_li); then, for the tokens
        left, the repair of the moves (w = p, then p^1.5) that left the box. Returns how many tokens the repairs
        rejected, and over a large vocabulary the whitened Z for w = p (for the descent), else None."""
        support = np.flatnonzero(p > 0)  # u > zero_tol > 0 for every undecided token
        repaired, repair_Z = 0, {}
        screen_powers, repair_powers = ((DENSE_POWERS, DENSE_POWERS) if self._descends() else
                                        (SCREEN_POWERS, REPAIR_POWERS if self.highs is None else ()))
        for power in screen_powers:
            candidates = np.flatnonzero(undecided)
            if not len(candidates):
                return repaired, repair_Z.get(1.0)
            Z, K, miss = self._whitened(support, p[support] ** power, candidates)
            if power in repair_powers:  # kept for the repair below: the same Z
                repair_Z[power] = Z
            at = np.searchsorted(support, candidates)
            ratio = p[support] ** (power - 1)  # w_l / p_l
            if power == 1 and len(support) * len(candidates) > SCREEN_VALUES:  # else exact blocks do it all
                self._screen_bounded(Z, K, at, candidates, p, miss, undecided, rejected)
            left = np.flatnonzero(undecided[candidates])  # the exact pass, most probable first
            left = left[np.argsort(-p[candidates[left]], kind="stable")][:EXACT_SCREEN]
            step = max(1, SCREEN_VALUES // len(support))
            for start in range(0, len(left), step):
                chunk = left[start : start + step]
                chunk = chunk[undecided[candidates[chunk]]]
                if not len(chunk):
                    continue
                block = Z.T @ Z[:, at[chunk]]  # (support, chunk): K_li
                if power == 1:  # K_(., i) / K_ii: the least-squares certificate direction
                    bounds = dual_bounds(block.T / K[at[chunk]][:, None], p[support], u[support])
                    undecided[support[bounds > self.settings.certificate_margin]] = False
                block *= ratio[:, None]
                block[at[chunk], np.arange(len(chunk))] = 0.0  # the move leaves token i itself out
                own = p[candidates[chunk]] ** power * K[at[chunk]]
                size = np.sqrt(K[at[chunk]] * (K * ratio**2).max())
                self._reject_moved(candidates[chunk], p, own, block.max(0), block.min(0), size, miss[chunk],
                                   undecided, rejected)
        # the tokens every plain move left (the most probable EXACT_SCREEN of them); where one LP holds every token
        # (the byte track) its warm-started re-solves (~1 ms) are cheaper than repairs that pin most of the tokens
        for power in repair_powers:
            left = np.flatnonzero(undecided)
            left = left[np.argsort(-p[left], kind="stable")][:EXACT_SCREEN]
            if not len(left):
                break
            repaired += self._repair(repair_Z[power], support, p[support] ** power, p, u, left, undecided, rejected)
        return repaired, repair_Z.get(1.0)

    def _project(self, Z: np.ndarray, support: np.ndarray, p: np.ndarray, u: np.ndarray, undecided: np.ndarray,
                 rejected: np.ndarray) -> int:
        """Reject the undecided tokens for which alternating projections find a witness (in place); how many.

        From p with q_i = 0, each round moves q to the nearest point (in the p-weighted norm) of the plane
        A q = A p, q_i = 0 (`_onto_plane`, with the screen's whitened Z for w = p) and clips it into the box shrunk
        by PROJECTION_MARGIN p (so that the next plane point, once near, lies inside [0, u]): PROJECTION_ROUNDS
        rounds at most, in float32; a token leaves once its mass outside [0, u] has not halved in PROJECTION_STALL
        rounds (an accepted token's stays at 2-14 p_i). A plane point inside [0, u] is projected again in float64
        from the same point, and checked as a witness (`_witnesses`). At SmolLM2's head it rejects 94-200 tokens a
        position under pure sampling, leaving the descent 0-15 to reject (it took 400-600 iterations for each)."""
        if len(Z) < len(self.Q):  # M inverted on part of its range: every plane point would miss A p there
            return 0
        ps, us, found = p[support], u[support], 0
        ps32, us32, Z32 = ps.astype(np.float32), us.astype(np.float32), Z.astype(np.float32)
        low, high = ps32 * np.float32(PROJECTION_MARGIN), us32 - ps32 * np.float32(PROJECTION_MARGIN)
        b = self.Q @ p
        order = np.flatnonzero(undecided)
        step = max(1, SCREEN_VALUES // len(support))
        for start in range(0, len(order), step):
            tokens = order[start : start + step]
            at = np.searchsorted(support, tokens)
            Zi = Z[:, at].T
            held = 1 - ps[at] * np.einsum("ij,ij->i", Zi, Zi)  # 1 - p_i K_ii: > 0 unless i alone carries a row
            keep = held > SCREEN_ERROR
            tokens, at, Zi, held = tokens[keep], at[keep], Zi[keep], held[keep]
            q = np.tile(ps32, (len(tokens), 1))  # float32: a candidate in the box is projected again in float64
            q[np.arange(len(tokens)), at] = 0.0
            before = np.full(len(tokens), np.inf)  # each token's mass outside [0, u] PROJECTION_STALL rounds ago
            for round_ in range(PROJECTION_ROUNDS):
                if not len(tokens):
                    break
                moved = _onto_plane(q, ps32, Z32, Zi.astype(np.float32), at, held.astype(np.float32))
                outside = np.maximum(np.maximum(-moved, moved - us32), 0.0).sum(1)
                inside = np.flatnonzero(outside == 0)  # checked, then gone (one that fails would stay so)
                exact = _onto_plane(q[inside].astype(np.float64), ps, Z, Zi[inside], at[inside], held[inside])
                in_box = ((exact >= 0) & (exact <= us)).all(1)
                boxed = inside[in_box]
                good = boxed[self._witnesses(exact[in_box], support, tokens[boxed], b, p)]
                rejected[tokens[good]], undecided[tokens[good]] = True, False
                found += len(good)
                left = np.ones(len(tokens), dtype=bool)
                left[inside] = False
                if round_ % PROJECTION_STALL == 0:  # stalled: left to the descent
                    left &= outside <= before / 2
                    before = outside
                tokens, at, Zi, held, before = tokens[left], at[left], Zi[left], held[left], before[left]
                q = np.clip(moved[left], low, high)
                q[np.arange(len(tokens)), at] = 0.0
        return found

    def _descend(self, Z: np.ndarray, support: np.ndarray, p: np.ndarray, u: np.ndarray, undecided: np.ndarray,
                 rejected: np.ndarray) -> tuple[int, dict[int, np.ndarray]]:
        """`_descend_tokens` on every undecided token of mass >= DESCENT_FLOOR, DESCENT_TOKENS at a time, the most
        probable first (a chunk's certificates settle tokens of later chunks too): how many it rejected, and each
        token's direction it left; a token of smaller mass still undecided after them gets its least-squares
        direction (the descent's first)."""
        order = np.flatnonzero(undecided)
        order = order[np.argsort(-p[order], kind="stable")]
        found, directions = 0, {}
        for start in range(0, len(order), DESCENT_TOKENS):
            tokens = order[start : start + DESCENT_TOKENS]
            tokens = np.sort(tokens[undecided[tokens] & (p[tokens] >= DESCENT_FLOOR)])
            if len(tokens):
                rejected_here, left = self._descend_tokens(Z, support, tokens, p, u, undecided, rejected)
                found += rejected_here
                directions.update(left)
        light = np.sort(order[(p[order] < DESCENT_FLOOR) & undecided[order]])
        for start in range(0, len(light), DESCENT_TOKENS):
            tokens = light[start : start + DESCENT_TOKENS]
            x, _ = _least_squares(Z[:, np.searchsorted(support, tokens)])
            directions.update(zip(tokens.tolist(), x.T @ Z))
        return found, {i: s for i, s in directions.items() if undecided[i]}

    def _descend_tokens(self, Z: np.ndarray, support: np.ndarray, tokens: np.ndarray, p: np.ndarray, u: np.ndarray,
                        undecided: np.ndarray, rejected: np.ndarray) -> tuple[int, dict[int, np.ndarray]]:
        """Settle undecided tokens by a descent on the dual (in place), `tokens` (sorted) at once: certificates and
        witnesses, each checked over every token; how many it rejected, and for each of `tokens` it left its last
        direction s (on the support).

        Token i is accepted iff some s in A's row space with s_i = 1 has f_i(s) = sum over l != i of
        p_l max(-s_l, c s_l) < p_i (L_i of `dual_bounds`). With s = Z^T z (Z diag(p) Z^T = I: the screen's Z for
        w = p) the descent minimises f_i smoothed (each kink rounded over a width mu_i = DESCENT_SMOOTHING p_i, so
        the gradient is Lipschitz with constant (1 + c) / (2 mu_i)) on the plane z . Z_i = 1, accelerated (FISTA,
        its momentum restarted where it carried a token's iterate uphill: `_restarted`), every undecided token at
        once; its iterations take the tokens of mass below DESCENT_TAIL (35,000-44,000 of SmolLM2's at the demo's
        positions, 10-27 % of p_i in f_i at the tokens it left) through a sample in proportion to mass
        (`mass_sample`). The gradient's weights x_l, the kinks' slopes
        (at a check averaged over the iterations since the last one, a token of the sample or of larger mass), lie
        in [-1, c]: a primal point. Z (p x) = nu Z_i + g;
        x - Z^T g meets Z (p x) = nu Z_i exactly, scaled by kappa <= 1 into [-1, c], so that sum_l p_l x_l A_l =
        lam A_i with lam = kappa nu. Where lam >= (1 + c) p_i, gamma = lam - p_i x_i >= p_i and
        q_l = p_l (1 + x_l p_i / gamma) (q_i = 0) is a witness. The smoothing leaves a gap: tokens
        whose optimum lies within a few percent of p_i are left (to `_polish`), as are those whose bounds a check
        finds no better by DESCENT_STALL."""
        c = self.settings.threshold / (1 - self.settings.threshold)
        ps, at = p[support], np.searchsorted(support, tokens)
        heavy = np.flatnonzero(ps >= DESCENT_TAIL)
        tail, weights = mass_sample(ps, np.flatnonzero(ps < DESCENT_TAIL), DESCENT_TAIL_SAMPLE)
        columns = np.concatenate([heavy, tail])
        Zh, ph = Z[:, columns].astype(np.float32), np.concatenate([ps[heavy], weights]).astype(np.float32)
        averaged = np.zeros((len(tokens), len(columns)), dtype=np.float32)  # the slopes since the last check
        Zi = Z[:, at]
        x, norms = _least_squares(Zi)
        mu = DESCENT_SMOOTHING * p[tokens]
        y, momentum, active = x.copy(), np.ones(len(tokens)), np.ones(len(tokens), dtype=bool)
        b, found = self.Q @ p, 0
        best = np.full((2, len(tokens)), -np.inf)  # each token's best certificate and witness bound, / p_i
        for iteration in range(1, DESCENT_ROUNDS + 1):
            a = np.flatnonzero(active)
            slopes = _kink_slopes(y[:, a].astype(np.float32).T @ Zh, mu[a].astype(np.float32), c)
            averaged[a] += slopes / DESCENT_CHECK
            g = (Zh @ (slopes * ph).T).astype(np.float64)
            g -= Zi[:, a] * (np.einsum("ij,ij->j", Zi[:, a], g) / norms[a])  # within the plane
            step = y[:, a] - (2 * mu[a] / (1 + c)) * g
            momentum[a] = _restarted(momentum[a], y[:, a], step, x[:, a])
            following = (1 + np.sqrt(1 + 4 * momentum[a] ** 2)) / 2
            y[:, a] = step + ((momentum[a] - 1) / following) * (step - x[:, a])
            x[:, a], momentum[a] = step, following
            if iteration % DESCENT_CHECK:
                continue
            s = x[:, a].T @ Z  # exact, every token
            s /= s[np.arange(len(a)), at[a]][:, None]
            bounds = dual_bounds(s, ps, u[support])
            undecided[support[bounds > self.settings.certificate_margin]] = False
            slopes = _kink_slopes(s, mu[a], c)
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
            found += self._reject_witnesses(moves, support, b, p, undecided, rejected)
            now = np.vstack([bounds[at[a]], kappa * nu / (1 + c)]) / p[tokens[a]]
            active[a[(now - best[:, a]).max(0) < DESCENT_STALL]] = False  # stalled: left to the polish
            best[:, a] = np.maximum(best[:, a], now)
            active &= undecided[tokens]
            if not active.any():
                break
        left = np.flatnonzero(undecided[tokens])
        return found, dict(zip(tokens[left].tolist(), x[:, left].T @ Z))

    def _polish(self, i: int, support: np.ndarray, s: np.ndarray, p: np.ndarray, u: np.ndarray,
                undecided: np.ndarray, rejected: np.ndarray) -> bool:
        """Settle token i by min q_i over parts of P (in place), from the descent's direction s (on the support):
        the column generation's free tokens and the POLISH_KINKS tokens of mass >= POLISH_FLOOR with the smallest
        |s_l| move freely, every other token (the tail) only as q_T = p_T + theta (v - p_T), theta in [0, 1], v the
        vertex of the tail's box that the direction's signs ask for (u_l where s_l > 0). Each such LP is solved by
        `interior_point` (dense, r rows); its q, checked against P, rejects the tokens it zeroes, its dual s'
        accepts those it certifies (`_settle`). Where i is left, the POLISH_KINKS tail tokens with the largest
        shares of the duality gap (|q_l - the bound s' asks for| times |s'_l|) join the free ones, v follows s', and
        the LP is solved again, POLISH_ROUNDS times at most (or until the tail's share of the gap is negligible).
        Whether i was settled; if not, the column generation takes it."""
        kinks = support[p[support] >= POLISH_FLOOR]
        kinks = kinks[np.argsort(np.abs(s[np.searchsorted(support, kinks)]), kind="stable")[:POLISH_KINKS]]
        free = np.zeros(self.V, dtype=bool)
        free[self._position_lp_free(p, undecided)] = True
        free[kinks] = free[i] = True
        at_top = np.zeros(self.V, dtype=bool)
        at_top[support] = s > 0
        b = self.Q @ p  # A p, for every round's check of its q
        for _ in range(POLISH_ROUNDS):
            found = self._polish_lp(i, np.flatnonzero(free), at_top, p, u, b)
            if found is None:
                return False
            q, s, in_p = found
            self._settle(q if in_p else np.ones(self.V), s, p, u, undecided, rejected)
            if not undecided[i]:
                return True
            # q_l's reduced cost, l != i (the LP's objective is q_i / u_i; i is free): -s_l. The optimum has
            # q_l = u_l where it is negative, else 0; each tail token's share of the duality gap is how far it is off
            reduced = -s
            gap = np.where(reduced < 0, (q - u) * reduced, q * reduced)
            gap[free] = 0.0
            if gap.sum() <= self.settings.feasibility_tol:  # the tail is where s' asks: more tokens would not help
                return False
            joining = np.argpartition(-gap, min(POLISH_KINKS, self.V - 1))[:POLISH_KINKS]
            free[joining[gap[joining] > 0]] = True
            at_top = reduced < 0
        return False

    def _polish_lp(self, i: int, free: np.ndarray, at_top: np.ndarray, p: np.ndarray, u: np.ndarray,
                   b: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """min q_i over the part of P where the `free` tokens move in [0, u] and the others towards the vertex
        (u_l where at_top, else 0) by `interior_point`: q, the dual direction s = Q^T y over every token, and
        whether q is in P (an iterate short of convergence may not be); None where the method's iterates or the
        dual are not finite."""
        tail = np.ones(self.V, dtype=bool)
        tail[free] = False
        move = np.where(tail & at_top, u, 0.0) - p
        move[~tail] = 0.0
        # the free tokens scaled to [0, 1] (q_l = u_l x_l), theta last
        A = np.hstack([self.Q[:, free] * u[free], (self.Q @ move)[:, None]])
        cost = np.zeros(len(free) + 1)
        cost[np.searchsorted(free, i)] = 1.0
        solution = interior_point(A, self.Q[:, free] @ p[free], cost, self.settings.feasibility_tol * 1e-1)
        if solution is None:
            return None
        x, y, _ = solution  # converged or not, q is checked and y gives a bound whatever it is
        s = self.Q.T @ y
        if not np.isfinite(s).all():  # an iterate that stopped short of an infeasible LP: y huge
            return None
        q = p + x[-1] * move
        q[free] = x[:-1] * u[free]
        in_p = _in_polytope(self.Q, q, b, u, 10 * self.settings.feasibility_tol)  # as an LP's answer
        return q, s, in_p

    def _repair(self, Z: np.ndarray, support: np.ndarray, w: np.ndarray, p: np.ndarray, u: np.ndarray,
                tokens: np.ndarray, undecided: np.ndarray, rejected: np.ndarray) -> int:
        """Reject the tokens whose move, repaired, is a witness (in place); how many.

        The screen's move for token i leaves [0, u] at a few tokens; pin those at the bound they crossed and move
        the others again, the least w-weighted change that keeps A q = A p: with the pinned set F (i among them) at
        d_F, d_l = -w_l Z_l . Z_F (diag(1 / w_F) - K_FF)^-1 (d_F / w_F) (Woodbury on M without the pinned), until no
        token crosses its bound, more than REPAIR_FIXED are pinned, or REPAIR_ROUNDS pass. Each q so found is
        clipped to [0, u] and checked against A q = A p over every token: a witness, like an LP's."""
        at_of = np.full(len(p), -1)
        at_of[support] = np.arange(len(support))
        c = self.settings.threshold / (1 - self.settings.threshold)
        low, high = -p[support], c * p[support]  # d's bounds on the support
        b, found = self.Q @ p, 0
        step = max(1, SCREEN_VALUES // len(support))
        for start in range(0, len(tokens), step):  # a chunk of tokens through every round: K_FF's memory stays small
            pinned = {int(i): Pinned([at_of[i]], [-p[i]]) for i in tokens[start : start + step]}
            for _ in range(REPAIR_ROUNDS):
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
                    if len(crossed) and len(at) + len(crossed) <= REPAIR_FIXED:
                        pinned[i].at.extend(crossed.tolist())
                        pinned[i].values.extend(np.clip(d[crossed], low[crossed], high[crossed]).tolist())
                        continue
                    del pinned[i]
                    if not len(crossed):
                        moves[i] = np.clip(p[support] + d, 0.0, u[support])
                found += self._reject_witnesses(moves, support, b, p, undecided, rejected)
        return found

    def _reject_witnesses(self, moves: dict[int, np.ndarray], support: np.ndarray, b: np.ndarray, p: np.ndarray,
                          undecided: np.ndarray, rejected: np.ndarray) -> int:
        """Reject each token i of `moves` whose q (its move on the support) is a witness (in place); how many."""
        if not moves:
            return 0
        tokens = np.fromiter(moves, dtype=np.int64, count=len(moves))
        good = tokens[self._witnesses(np.stack(list(moves.values())), support, tokens, b, p)]
        rejected[good], undecided[good] = True, False
        return len(good)

    def _witnesses(self, q_support: np.ndarray, support: np.ndarray, tokens: np.ndarray, b: np.ndarray,
                   p: np.ndarray) -> np.ndarray:
        """Which rows q of q_support (q on the support, 0 elsewhere and at its token of `tokens`), inside [0, u],
        meet A q = A p: to the LPs' tolerance and to SCREEN_ERROR of the mass moved (dropping a token of mass below
        the tolerance would otherwise pass without any move; its repair, exact, misses A p by rounding, ~1e-16 p_i).
        Checked over every token, WITNESS_BATCH rows in one product (one pass over A's rows, not one a row)."""
        tol = np.minimum(10 * self.settings.feasibility_tol, SCREEN_ERROR * p[tokens])
        found = np.zeros(len(tokens), dtype=bool)
        for start in range(0, len(tokens), WITNESS_BATCH):
            batch = slice(start, start + WITNESS_BATCH)
            q = np.zeros((len(tokens[batch]), self.V))
            q[:, support] = q_support[batch]
            q[np.arange(len(q)), tokens[batch]] = 0.0
            found[batch] = np.abs(q @ self.Q.T - b).max(1) <= tol[batch]
        return found

    def _whitened(self, support: np.ndarray, w: np.ndarray, candidates: np.ndarray):
        """Z with Z^T Z = K = Q^T M^+ Q on the support, M = Q diag(w) Q^T inverted on its eigenvalues above largest /
        SCREEN_CONDITION; K's diagonal; each candidate Q_i's norm outside the range kept (the move's miss)."""
        Qs = self.Q if len(support) == self.V else self.Q[:, support]  # no copy where every token has mass
        X = Qs * np.sqrt(w)
        eigenvalues, vectors = np.linalg.eigh(X @ X.T)  # X X^T: NumPy's symmetric product, half a general one's work
        kept = eigenvalues > eigenvalues[-1] / SCREEN_CONDITION
        Z = np.ascontiguousarray((vectors[:, kept] / np.sqrt(eigenvalues[kept])).T) @ Qs
        miss = np.linalg.norm(vectors[:, ~kept].T @ self.Q[:, candidates], axis=0) if not kept.all() else \
            np.zeros(len(candidates))
        return Z, np.einsum("ij,ij->j", Z, Z), miss

    def _screen_bounded(self, Z, K, at, candidates, p, miss, undecided, rejected) -> None:
        """The screen's first pass: K_li exact for the HEAVY_TOKENS l of largest K_ll, bounded by Cauchy-Schwarz
        (|K_li| <= sqrt(K_ll K_ii)) for the others."""
        n_heavy = min(HEAVY_TOKENS, len(K) - 1)
        heavy = np.argpartition(-K, n_heavy)[:n_heavy]
        light = np.ones(len(K), dtype=bool)
        light[heavy] = False
        row_of = np.full(len(K), -1)
        row_of[heavy] = np.arange(n_heavy)
        spread = np.sqrt(K[at] * K[light].max())
        high, low = spread.copy(), -spread
        step = max(1, SCREEN_VALUES // max(n_heavy, 1))
        for start in range(0, len(at), step):
            columns = at[start : start + step]
            block = Z[:, heavy].T @ Z[:, columns]
            own = row_of[columns] >= 0  # a heavy candidate's own entry: the move leaves it out
            block[row_of[columns][own], np.flatnonzero(own)] = 0.0
            np.maximum(high[start : start + step], block.max(0, initial=-np.inf), out=high[start : start + step])
            np.minimum(low[start : start + step], block.min(0, initial=np.inf), out=low[start : start + step])
        self._reject_moved(candidates, p, p[candidates] * K[at], high, low, np.sqrt(K[at] * K.max()), miss, undecided,
                           rejected)

    def _reject_moved(self, tokens, p, own, high, low, size, miss, undecided, rejected) -> None:
        """Reject the tokens whose move q = p + d, d_i = -p_i, d_l = a w_l K_li (l != i), a = p_i / (1 - w_i K_ii),
        stays in [0, u]: -1 <= a (w_l / p_l) K_li <= c for every l != i (high, low: the max and min of
        (w_l / p_l) K_li over them; own: w_i K_ii), and reaches A q = A p (to `miss`). Rounding: those within
        SCREEN_ERROR * size of their values, w_i K_ii within SCREEN_ERROR; the test holds for the worst of them."""
        c = self.settings.threshold / (1 - self.settings.threshold)
        left = 1 - own - SCREEN_ERROR  # at most the true 1 - w_i K_ii
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(left > SCREEN_ERROR, p[tokens] / left, np.inf)
            room = SCREEN_ERROR * size
            fits = ((scale * (high + room) <= c) & (scale * (room - low) <= 1)
                    & (scale * miss <= self.settings.feasibility_tol))
        rejected[tokens[fits]] = True
        undecided[tokens[fits]] = False

    def _certify(self, undecided: np.ndarray, p: np.ndarray, u: np.ndarray) -> None:
        """Settle as accepted the undecided tokens that a reweighted direction proves (in place): the
        `MAX_DIRECTIONS` most probable undecided tokens, a few at a time."""
        tokens = np.flatnonzero(undecided)
        if len(tokens) > MAX_DIRECTIONS:
            tokens = np.sort(tokens[np.argpartition(-p[tokens], MAX_DIRECTIONS - 1)[:MAX_DIRECTIONS]])
        chunk = max(1, DIRECTION_VALUES // (self.Q.shape[0] * self.V))
        for start in range(0, len(tokens), chunk):
            bounds = dual_bounds(self._reweighted_directions(p, u, tokens[start : start + chunk]), p, u)
            undecided &= ~(bounds > self.settings.certificate_margin)

    def _reweighted_directions(self, p: np.ndarray, u: np.ndarray, tokens: np.ndarray, rounds: int = 6) -> np.ndarray:
        """Least-squares directions reweighted towards the dual objective's asymmetric L1 cost
        (u_l - p_l per unit above 0, p_l per unit below), a few rounds, the given tokens at once."""
        if not len(tokens):
            return np.zeros((0, self.V))
        Q, m = self.Q, len(tokens)
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


def interior_point(A: np.ndarray, b: np.ndarray, c: np.ndarray,
                   tol: float) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """min c.x subject to A x = b, 0 <= x <= 1, by Mehrotra's predictor-corrector (dense normal equations): x, the
    row duals y (c - A^T y the reduced costs) and whether it converged (residuals below tol relative to b and c,
    complementarity below tol / 100). Where it stops short (POLISH_ITERATIONS, normal equations too ill-conditioned to
    factor, or a primal residual that stalls above tol once the rest is optimal: rounding near a degenerate optimum)
    it gives its last iterate, which a caller may only use as it would any point and any dual (checked); None where
    its iterates are not finite (an infeasible LP).

    The rows are first made orthonormal: A^T = B R (QR), so A x = b iff B^T x = R^-T b, and y = R^-1 y' for the
    duals y' of those rows. The normal equations' condition is then D's alone, not the columns' scales (u_l, from
    0.1 down to 1e-15 over a vocabulary, where tokens of tiny mass settle a tiny token); where R is singular to
    ROW_RANK (dependent rows, or fewer columns than rows) the rows are used as they are."""
    if A.shape[1] >= A.shape[0]:
        basis, R = np.linalg.qr(A.T)
        diagonal = np.abs(np.diag(R))
        if diagonal.min() > ROW_RANK * diagonal.max():
            found = _mehrotra(np.ascontiguousarray(basis.T), scipy.linalg.solve_triangular(R, b, trans="T"), c, tol,
                              b_scale=1 + np.abs(b).max())
            if found is None:
                return None
            x, y, converged = found
            return x, scipy.linalg.solve_triangular(R, y), converged
    return _mehrotra(A, b, c, tol)


def _mehrotra(A: np.ndarray, b: np.ndarray, c: np.ndarray, tol: float,
              b_scale: float | None = None) -> tuple[np.ndarray, np.ndarray, bool] | None:
    """`interior_point`'s method on rows as they are; the primal residual's tolerance is tol times b_scale (default
    1 + max |b|: the caller's b where the rows were transformed)."""
    n = A.shape[1]
    x, w, z, v, y = np.full(n, 0.5), np.full(n, 0.5), np.ones(n), np.ones(n), np.zeros(A.shape[0])
    b_scale, c_scale = 1 + np.abs(b).max() if b_scale is None else b_scale, 1 + np.abs(c).max()
    best_primal, stalled = np.inf, 0
    with np.errstate(all="ignore"):  # an infeasible LP drives x or w to 0: its iterates stop being finite
        for _ in range(POLISH_ITERATIONS):
            primal, dual = b - A @ x, c - A.T @ y - z + v
            mu = (x @ z + w @ v) / (2 * n)
            residual, optimal = np.abs(primal).max(), np.abs(dual).max() <= tol * c_scale and mu <= tol / 100
            if optimal and residual <= tol * b_scale:
                return x, y, True
            best_primal, stalled = (residual, 0) if residual < best_primal / 2 else (best_primal, stalled + 1)
            if optimal and stalled >= POLISH_STALL:  # the primal residual no longer falls: rounding (degenerate)
                return x, y, False
            D = 1 / (z / x + v / w)
            # (A D A^T)'s upper triangle, what cho_factor reads (A^T's Fortran order: no copy)
            normal = scipy.linalg.blas.dsyrk(1.0, (A * np.sqrt(D)).T, trans=1)
            normal[np.diag_indices_from(normal)] += 1e-14 * np.trace(normal) / len(normal)
            try:
                factor = scipy.linalg.cho_factor(normal)
            except (np.linalg.LinAlgError, ValueError):  # singular (x is finite: checked below)
                return x, y, False

            def newton(rxz, rwv):
                rho = rxz / x - rwv / w - dual
                dy = scipy.linalg.cho_solve(factor, primal - A @ (D * rho), check_finite=False)
                dx = D * (A.T @ dy + rho)
                return dx, dy, (rxz - z * dx) / x, (rwv + v * dx) / w

            def step_lengths(dx, dz, dv):
                return min(1.0, _step_to_bound(x, dx), _step_to_bound(w, -dx)), min(1.0, _step_to_bound(z, dz),
                                                                                      _step_to_bound(v, dv))

            dx, dy, dz, dv = newton(-x * z, -w * v)  # the affine step
            ap, ad = step_lengths(dx, dz, dv)
            mu_affine = ((x + ap * dx) @ (z + ad * dz) + (w - ap * dx) @ (v + ad * dv)) / (2 * n)
            sigma = (mu_affine / mu) ** 3
            dx, dy, dz, dv = newton(sigma * mu - x * z - dx * dz, sigma * mu - w * v + dx * dv)
            ap, ad = (0.995 * a for a in step_lengths(dx, dz, dv))
            x, w, y, z, v = x + ap * dx, w - ap * dx, y + ad * dy, z + ad * dz, v + ad * dv
            if not all(np.isfinite(a).all() for a in (x, w, y, z, v)):
                return None
    return x, y, False


def _in_polytope(Q: np.ndarray, q: np.ndarray, b: np.ndarray, u: np.ndarray, tol: float) -> bool:
    """Whether q meets Q q = b and 0 <= q <= u, each to tol (an LP's answer, checked over every token)."""
    return bool(np.abs(Q @ q - b).max() <= tol and q.min() >= -tol and (q - u).max() <= tol)


def _step_to_bound(a: np.ndarray, da: np.ndarray) -> float:
    """The largest step t with a + t da >= 0 (a > 0), inf where da >= 0."""
    falling = da < 0
    return float((-a[falling] / da[falling]).min()) if falling.any() else np.inf


def _restarted(momentum: np.ndarray, y: np.ndarray, step: np.ndarray, x: np.ndarray) -> np.ndarray:
    """FISTA's momentum with the gradient restart (O'Donoghue and Candes 2015) per column: 1 where the gradient step
    from y (y - step, along the gradient) and the last move (step - x) point the same way, i.e. the momentum
    carried the iterate uphill."""
    uphill = np.einsum("ij,ij->j", y - step, step - x) > 0
    return np.where(uphill, 1.0, momentum)


def _onto_plane(q: np.ndarray, p: np.ndarray, Z: np.ndarray, Zi: np.ndarray, at: np.ndarray,
                held: np.ndarray) -> np.ndarray:
    """Each row of q (a point on the support for token i at `at`) moved to the nearest point, in the p-weighted
    norm, of the plane A q = A p with q_i = 0: Z diag(p) Z^T = I, r = Z (q - p), q_l -= p_l Z_l . (r + Z_i p_i
    (Z_i . r) / held) with held = 1 - p_i K_ii (Sherman-Morrison: q_i held at 0). In q's precision."""
    r = (q - p) @ Z.T
    r += Zi * (p[at] * np.einsum("ij,ij->i", Zi, r) / held)[:, None]
    moved = q - p * (r @ Z)
    moved[np.arange(len(q)), at] = 0.0
    return moved


def _least_squares(Zi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def _kink_slopes(s: np.ndarray, mu: np.ndarray, c: float) -> np.ndarray:
    """The slopes of max(-s, c s) with its kink rounded over width mu (per row): in [-1, c]."""
    return (1 + c) / 2 * np.clip(s / mu[:, None], -1, 1) + (c - 1) / 2


# ----------------------------------------------------------------------------------------------
# Positions of a model


@dataclass(frozen=True)
class TBATRow:
    index: int
    tbat: float
    n_rejected: int
    lp_solves: int
    failed: bool


def tbat_positions(
    W: np.ndarray, probs: np.ndarray, settings: TBATSettings, *, basis: np.ndarray | None = None, workers: int = 1,
    log_every: int = 0
) -> list[TBATRow]:
    """TBAT of every row of `probs` (n, V) for head matrix W (its row basis `basis` where known), over `workers`
    processes."""
    if workers <= 1 or len(probs) < 2 * workers:
        return list(_tbat_chunk(W, basis, probs, settings, 0, log_every))
    chunks = np.array_split(np.arange(len(probs)), workers)
    with worker_pool(workers) as pool:
        futures = [pool.submit(_tbat_list, W, basis, probs[c], settings, int(c[0]), log_every) for c in chunks
                   if len(c)]
        return [row for f in futures for row in f.result()]


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """`workers` processes for TBAT's positions, each with BLAS on one thread."""
    return ProcessPoolExecutor(workers, initializer=one_blas_thread)


def one_blas_thread() -> None:
    """BLAS on one thread in this process: a TBAT worker's. Snakemake sets OPENBLAS_NUM_THREADS to a job's threads,
    which are its workers here, and each would start that many. With two threads on two cores the polish's
    matrix-vector products took 14 times as long (3.2 ms against 0.23), and its LPs for 40 tokens of SmolLM2's head
    24.4 s against 11.6."""
    threadpoolctl.threadpool_limits(1)


def _tbat_list(W, basis, probs, settings, offset, log_every) -> list[TBATRow]:
    return list(_tbat_chunk(W, basis, probs, settings, offset, log_every))


def _tbat_chunk(W: np.ndarray, basis: np.ndarray | None, probs: np.ndarray, settings: TBATSettings, offset: int,
                log_every: int) -> Iterator[TBATRow]:
    solver = BATSolver(W, settings, basis)
    started = time.perf_counter()
    for n, p in enumerate(probs):
        result = solver.reject_set(p)
        yield TBATRow(offset + n, result.tbat(p), int(result.rejected.sum()), result.lp_solves, result.failed)
        if log_every and (n + 1) % log_every == 0:
            log.info("pid %d: %d/%d positions, %.1f s", os.getpid(), n + 1, len(probs), time.perf_counter() - started)


TBAT_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("method", pa.string()),
        ("tbat", pa.float64()),
        ("n_rejected", pa.int32()),  # of up to 49,152 tokens in the token track
        ("lp_solves", pa.int32()),
        ("failed", pa.bool_()),
    ]  # no wall-clock seconds: the same inputs give the same bytes (the job's log and benchmark time it)
)


def model_tbat(
    W: np.ndarray,
    rows: SampledRows,
    out_path: str | os.PathLike,
    decodings: Sequence,
    settings: TBATSettings,
    *,
    workers: int = 1,
) -> pa.Table:
    """TBAT at sampled positions (`rows`: the same for every model) after each decoding, to Parquet."""
    basis = row_basis(np.asarray(W, dtype=np.float64), settings.rank_tol)  # once for every decoding
    log.info("k = %d (rank of [W^T; 1^T] %d), V = %d: %d positions x %d decodings, %d workers", W.shape[1],
             basis.shape[0], W.shape[0], len(rows.position), len(decodings), workers)
    tables = []
    for decoding in decodings:
        probs = np.exp(decoding(rows.logprobs.astype(np.float64)))
        probs /= probs.sum(1, keepdims=True)
        started = time.perf_counter()
        results = tbat_positions(W, probs, settings, basis=basis, workers=workers, log_every=max(1, len(probs) // 5))
        failed = sum(r.failed for r in results)
        log.info("%s: mean TBAT %.4g, %d LP solves, %d solver failures, %.1f s", decoding.method,
                 np.nanmean([r.tbat for r in results]), sum(r.lp_solves for r in results), failed,
                 time.perf_counter() - started)
        tables.append(pa.table({
            "prompt_id": rows.prompt_id, "position": rows.position, "method": [decoding.method] * len(results),
            "tbat": [r.tbat for r in results], "n_rejected": np.array([r.n_rejected for r in results], dtype=np.int32),
            "lp_solves": np.array([r.lp_solves for r in results], dtype=np.int32),
            "failed": [r.failed for r in results],
        }, schema=TBAT_SCHEMA))
    table = pa.concat_tables(tables)
    write_parquet(table, out_path)
    return table
