"""The LPs: HiGHS over P's tokens, and the dense interior-point method of the polish.

Up to FULL_LP_COLUMNS tokens (the byte track) one HiGHS LP per model is built once (`build_lp`) and re-solved with
new bounds and costs, each solve warm-started from the last basis; above it each position builds its own smaller LP,
by column generation (`PositionLP`). `solve_position` settles a position's undecided tokens with it: minimising
sum over undecided i of q_i / u_i gives vertices that zero many tokens at once (witnesses); the tokens left are
settled by min q_i, one LP each, whose dual solution is a certificate candidate (`decide_token`).

Column generation over a large vocabulary. Its LP frees the undecided and the most probable tokens (`free_tokens`);
every other token (the tail) moves only as q_T = p_T + sum_k theta_k (v_k - p_T), theta >= 0, sum theta <= 1, with
v_k vertices of the tail's box [0, u_T] (Dantzig-Wolfe columns): every such q is in P, so a witness of this LP is a
witness of P. Its dual s is a certificate of P when L_i(s) > margin over every token; where it is not, the vertex
the dual asks for (each tail token at the bound its reduced cost wants) joins the LP, until a witness, a
certificate, or no vertex improves (then the LP's optimum is P's).

A solver failure marks the position failed (TBAT NaN), never accept or reject."""

from __future__ import annotations

import highspy
import numpy as np
import scipy.linalg

from oversmooth.analysis.bat import settings
from oversmooth.analysis.bat.polytope import Polytope
from oversmooth.analysis.bat.result import BATResult


def build_lp(Q: np.ndarray, columns: np.ndarray, feasibility_tol: float, convexity: bool = False) -> highspy.Highs:
    """HiGHS over `columns` of A's row basis Q (bounds and right-hand side set by PositionLP), with the tail's
    convexity row (sum theta <= 1) where some tokens are not columns."""
    r, n = Q.shape[0], len(columns)
    h = highspy.Highs()
    for option, value in (
        ("output_flag", False), ("presolve", "off"), ("threads", 1),
        ("simplex_scale_strategy", 0),  # the rows are orthonormal; rescaling at every re-solve cost ~30 %
        ("primal_feasibility_tolerance", feasibility_tol), ("dual_feasibility_tolerance", feasibility_tol),
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
    lp.a_matrix_.value_ = np.ascontiguousarray(Q[:, columns].T).reshape(-1)
    h.passModel(lp)
    return h


def free_tokens(P: Polytope, undecided: np.ndarray, at_least: int = 0) -> np.ndarray:
    """A large vocabulary's free tokens: the undecided and the most probable, at least `at_least` of them (sorted)."""
    free = undecided.copy()
    n_free = min(P.V - 1, max(settings.FREE_COLUMNS, settings.FREE_PER_ROW * P.Q.shape[0], at_least))
    free[np.argpartition(-P.p, n_free)[:n_free]] = True
    return np.flatnonzero(free)


class PositionLP:
    """min cost.q over P for one position: HiGHS over the `free` tokens; every other token (the tail) at
    q_T = p_T + sum_k theta_k (v_k - p_T), theta >= 0, sum theta <= 1, with v_k vertices of the tail's box
    [0, u_T] (Dantzig-Wolfe columns, one row more): every q so made is in P, and pricing adds the vertex that the
    dual asks for, so that the LP's optimum tends to P's."""

    def __init__(self, highs: highspy.Highs, P: Polytope, free: np.ndarray):
        self.highs, self.P = highs, P
        self.Q, self.p, self.u, self.settings = P.Q, P.p, P.u, P.settings
        self.free = free
        self.tail = np.ones(len(self.p), dtype=bool)
        self.tail[free] = False
        self.every_token = not self.tail.any()
        self.vertices: list[np.ndarray] = []  # per column: the tail tokens at u_l (the others at 0)
        self.rhs = P.b if self.every_token else self.Q[:, free] @ self.p[free]  # the free tokens' share of A p
        r, n = self.Q.shape[0], len(free)
        self._columns = np.arange(n, dtype=np.int32)
        self.highs.changeColsBounds(n, self._columns, np.zeros(n), self.u[free])
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
        return q if self.P.contains(q, 10 * self.settings.feasibility_tol) else None

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


def solve_position(lp: PositionLP, result: BATResult, undecided: np.ndarray, rejected: np.ndarray) -> None:
    """Settle the undecided tokens by LPs (in place), or stop at the first failure (result failed)."""
    P, refined = lp.P, False
    while undecided.any():
        u = P.u
        weights = np.where(undecided, u.min(where=undecided, initial=1.0) / np.where(undecided, u, 1.0), 0.0)
        found = lp.solve(weights, result)  # sum of q_i / u_i over the undecided, scaled to max 1
        if found is None:
            return
        if P.settle(*found, undecided, rejected):
            continue
        if not refined and lp.every_token:  # the witnesses dried up: the rest is mostly accepted
            refined = True
            P.certify(undecided)
        for i in np.flatnonzero(undecided):
            if undecided[i] and not decide_token(i, lp, result, undecided, rejected):
                return


def decide_token(i: int, lp: PositionLP, result: BATResult, undecided: np.ndarray, rejected: np.ndarray) -> bool:
    """Settle token i by min q_i, adding tail vertices until a witness, a certificate or P's optimum; False if
    the LP failed."""
    P = lp.P
    cost = np.zeros(P.V)
    cost[i] = 1.0
    rounds = settings.MAX_PRICING_ROUNDS if len(P.Q) <= settings.DESCENT_ROWS else settings.DENSE_PRICING_ROUNDS
    for _ in range(rounds):
        found = lp.solve(cost, result)
        if found is None:
            return False
        P.settle(*found, undecided, rejected)
        if not undecided[i]:
            return True
        if not lp.price(found[1]):  # the LP's optimum is P's: min q_i > zero_tol accepts i
            undecided[i] = False
            return True
    result.failed = True
    result.stats["status"] = f"token {i} undecided after {rounds} pricing rounds"
    return False


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
        if diagonal.min() > settings.ROW_RANK * diagonal.max():
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
        for _ in range(settings.POLISH_ITERATIONS):
            primal, dual = b - A @ x, c - A.T @ y - z + v
            mu = (x @ z + w @ v) / (2 * n)
            residual, optimal = np.abs(primal).max(), np.abs(dual).max() <= tol * c_scale and mu <= tol / 100
            if optimal and residual <= tol * b_scale:
                return x, y, True
            best_primal, stalled = (residual, 0) if residual < best_primal / 2 else (best_primal, stalled + 1)
            if optimal and stalled >= settings.POLISH_STALL:  # the primal residual no longer falls: rounding
                return x, y, False  # (degenerate)
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


def _step_to_bound(a: np.ndarray, da: np.ndarray) -> float:
    """The largest step t with a + t da >= 0 (a > 0), inf where da >= 0."""
    falling = da < 0
    return float((-a[falling] / da[falling]).min()) if falling.any() else np.inf
