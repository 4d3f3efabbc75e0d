"""TBAT, the total BAT-reject set mass (thesis §4.1.6, appendix D), exact and fast.

For a model output p over V bytes and the matrix W (V x k) that maps the head's input to logits,
byte i is BAT-rejected iff some q exists with

    q_i = 0,  sum(q) = 1,  0 <= q <= u = p / (1 - threshold),  W^T q = W^T p,

and TBAT is the mass p puts on the rejected bytes. With A = [W^T; 1^T] the constraints are
A q = A p, 0 <= q <= u: a polytope P that contains p. Facts the solver uses:

- rank(A) = V: q = p is the only point of P, so nothing with p_i > 0 is rejected (no LP at all).
- i can be rejected only if sum over j != i of u_j >= 1, i.e. p_i <= threshold.
- A vertex q of P with q_i = 0 proves i rejected (a witness; it is checked against the constraints).
  Minimising sum over undecided i of q_i / u_i gives vertices that zero many bytes at once.
- For any s in the row space of A, min over P of q_i >= L_i(s) = p.s - sum_l u_l max(s_l - [l = i], 0)
  (weak LP duality). L_i(s) > 0 proves i accepted (a certificate). Candidates for s: for each byte the
  p-weighted least-squares direction with s_i = 1, refined by reweighting towards the dual objective,
  and the dual solutions of every LP solved.
- Bytes neither proved nor refuted are settled by `min q_i` over P, one LP each.

Over a large vocabulary (the token track's 49,152 tokens, W a rank-k head's up-projection) only the most
probable undecided tokens get certificate directions, a few at a time; the LPs settle the rest.

One HiGHS LP per model is built once (its rows, an orthonormal basis of A's rows, depend on W
only) and re-solved with new bounds and costs, each solve warm-started from the last basis.
A solver failure marks the position failed (TBAT NaN), never accept or reject.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np
import pyarrow as pa

from oversmooth.core.io import write_parquet
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import SampledRows

log = get_logger("tbat")


MAX_DIRECTIONS = 256  # tokens given certificate directions per round: every byte, or a vocabulary's most probable
DIRECTION_VALUES = 2**21  # a chunk of directions holds about this many values (r x V per token), 16 MB


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
    """max over the rows s of S (each in A's row space, scaled so that the bound is best) of L_i(s), per byte i.

    L_i(a s) = a (p.s - u.max(s, 0)) + u_i min(a s_i, 1)^+ is best at a = 1 / s_i for s_i > 0. Rows are taken
    `chunk` at a time, so that the temporaries stay small over a large vocabulary."""
    best = np.full(len(p), -np.inf)
    for start in range(0, len(S), chunk):
        rows = S[start : start + chunk]
        base = rows @ p - np.clip(rows, 0, None) @ u  # (m,)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.maximum(best, np.where(rows > 0, base[:, None] / rows + u[None, :], -np.inf).max(0), out=best)
    return best


class BATSolver:
    """The BAT-reject set of one model's outputs, position after position."""

    def __init__(self, W: np.ndarray, settings: TBATSettings = TBATSettings()):
        self.settings = settings
        self.V = W.shape[0]
        self.Q = row_basis(np.asarray(W, dtype=np.float64), settings.rank_tol)
        self.full_rank = self.Q.shape[0] == self.V
        self.highs = None if self.full_rank else self._build_lp()

    def _build_lp(self) -> highspy.Highs:
        V, r, s = self.V, self.Q.shape[0], self.settings
        h = highspy.Highs()
        for option, value in (
            ("output_flag", False), ("presolve", "off"), ("threads", 1),
            ("simplex_scale_strategy", 0),  # the rows are orthonormal; rescaling at every re-solve cost ~30 %
            ("primal_feasibility_tolerance", s.feasibility_tol), ("dual_feasibility_tolerance", s.feasibility_tol),
        ):
            h.setOptionValue(option, value)
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = V, r
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.zeros(V), np.zeros(V), np.ones(V)
        lp.row_lower_, lp.row_upper_ = np.zeros(r), np.zeros(r)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.arange(0, V * r + 1, r)
        lp.a_matrix_.index_ = np.tile(np.arange(r), V)
        lp.a_matrix_.value_ = np.ascontiguousarray(self.Q.T).reshape(-1)
        h.passModel(lp)
        self._cols, self._rows = np.arange(V, dtype=np.int32), np.arange(r, dtype=np.int32)
        return h

    def reject_set(self, p: np.ndarray) -> BATResult:
        """The BAT-rejected bytes of output p (a probability vector over V bytes)."""
        p = np.asarray(p, dtype=np.float64)
        s = self.settings
        u = p / (1 - s.threshold)
        # Every q in P has q_i <= u_i: where u_i <= zero_tol, q = p itself is a witness (mass 0 to TBAT's precision)
        zero = u <= s.zero_tol
        # At full rank q = p is the only point, so the answer is exact: the bytes with p_i = 0, and TBAT is 0. Below
        # it the LPs' answers hold to zero_tol, so a byte with u_i <= zero_tol counts as rejected (mass <= 1e-9).
        if self.full_rank:
            return BATResult(p == 0, stats={"full_rank": True})
        undecided = (p <= s.threshold + 1e-12) & ~zero
        rejected = zero.copy()
        self._certify(undecided, p, u, self._least_squares_directions)
        result = BATResult(rejected)
        if not undecided.any():
            return result
        b = self.Q @ p
        self.highs.changeColsBounds(self.V, self._cols, np.zeros(self.V), u)
        self.highs.changeRowsBounds(len(b), self._rows, b, b)
        refined = False
        while undecided.any():
            weights = np.where(undecided, u.min(where=undecided, initial=1.0) / np.where(undecided, u, 1.0), 0.0)
            q, y = self._solve(weights, result, p, b, u)  # sum of q_i / u_i over the undecided, scaled to max 1
            if q is None:
                return result
            newly = undecided & (q <= s.zero_tol)
            rejected |= newly
            undecided &= ~newly
            undecided &= ~(dual_bounds(np.vstack([self.Q.T @ y, -self.Q.T @ y]), p, u) > s.certificate_margin)
            if newly.any():
                continue
            if not refined:  # the witnesses dried up: the rest is mostly accepted; try cheap certificates first
                refined = True
                self._certify(undecided, p, u, self._reweighted_directions)
            for i in np.flatnonzero(undecided):
                if not undecided[i]:
                    continue
                cost = np.zeros(self.V)
                cost[i] = 1.0
                q, y = self._solve(cost, result, p, b, u)
                if q is None:
                    return result
                newly = undecided & (q <= s.zero_tol)
                rejected |= newly
                undecided &= ~newly
                undecided[i] = False  # settled either way: q_i = min q_i
                undecided &= ~(dual_bounds(np.vstack([self.Q.T @ y, -self.Q.T @ y]), p, u) > s.certificate_margin)
        return result

    def _solve(self, cost: np.ndarray, result: BATResult, p, b, u) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Minimise cost.q over P; the vertex q and the row duals, or None (and the result failed)."""
        self.highs.changeColsCost(self.V, self._cols, cost)
        run_status = self.highs.run()
        result.lp_solves += 1
        model_status = self.highs.getModelStatus()
        if run_status != highspy.HighsStatus.kOk or model_status != highspy.HighsModelStatus.kOptimal:
            result.failed = True
            result.stats["status"] = f"{run_status}, {self.highs.modelStatusToString(model_status)}"
            return None, None
        solution = self.highs.getSolution()
        q = np.asarray(solution.col_value)
        tol = 10 * self.settings.feasibility_tol
        if np.abs(self.Q @ q - b).max() > tol or (q < -tol).any() or (q > u + tol).any():
            result.failed = True  # a witness that does not satisfy the constraints proves nothing
            result.stats["status"] = "witness outside the polytope"
            return None, None
        return q, np.asarray(solution.row_dual)

    def _certify(self, undecided: np.ndarray, p: np.ndarray, u: np.ndarray, directions) -> None:
        """Settle as accepted the undecided tokens that a dual bound proves (in place). The candidates are every
        undecided token, or over a large vocabulary the `MAX_DIRECTIONS` most probable (the likeliest to be
        accepted; the LPs settle the rest); their directions are made and used a few at a time."""
        tokens = np.flatnonzero(undecided)
        if len(tokens) > MAX_DIRECTIONS:
            tokens = np.sort(tokens[np.argpartition(-p[tokens], MAX_DIRECTIONS - 1)[:MAX_DIRECTIONS]])
        chunk = max(1, DIRECTION_VALUES // (self.Q.shape[0] * self.V))
        for start in range(0, len(tokens), chunk):
            bounds = dual_bounds(directions(p, u, tokens[start : start + chunk]), p, u)
            undecided &= ~(bounds > self.settings.certificate_margin)

    def _least_squares_directions(self, p: np.ndarray, u: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """For each token i, the s in A's row space minimising sum_l p_l s_l^2 with s_i = 1."""
        if not len(tokens):
            return np.zeros((0, self.V))
        G = np.linalg.solve(_ridge((self.Q * p) @ self.Q.T), self.Q[:, tokens])  # (r, m)
        S = (self.Q.T @ G).T  # (m, V)
        return S / S[np.arange(len(tokens)), tokens][:, None]

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


def _ridge(M: np.ndarray) -> np.ndarray:
    """M plus a relative 1e-12 ridge: the heuristic directions need a solvable system, not an exact one."""
    return M + (1e-12 * np.trace(M) / len(M) + 1e-300) * np.eye(len(M))


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
    W: np.ndarray, probs: np.ndarray, settings: TBATSettings, *, workers: int = 1, log_every: int = 0
) -> list[TBATRow]:
    """TBAT of every row of `probs` (n, V) for head matrix W, over `workers` processes."""
    if workers <= 1 or len(probs) < 2 * workers:
        return list(_tbat_chunk(W, probs, settings, 0, log_every))
    from concurrent.futures import ProcessPoolExecutor

    chunks = np.array_split(np.arange(len(probs)), workers)
    with ProcessPoolExecutor(workers) as pool:
        futures = [pool.submit(_tbat_list, W, probs[c], settings, int(c[0]), log_every) for c in chunks if len(c)]
        return [row for f in futures for row in f.result()]


def _tbat_list(W, probs, settings, offset, log_every) -> list[TBATRow]:
    return list(_tbat_chunk(W, probs, settings, offset, log_every))


def _tbat_chunk(W: np.ndarray, probs: np.ndarray, settings: TBATSettings, offset: int, log_every: int) -> Iterator[TBATRow]:
    solver = BATSolver(W, settings)
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
    log.info("k = %d (rank of [W^T; 1^T] %d), V = %d: %d positions x %d decodings, %d workers", W.shape[1],
             row_basis(W, settings.rank_tol).shape[0], W.shape[0], len(rows.position), len(decodings), workers)
    tables = []
    for decoding in decodings:
        probs = np.exp(decoding(rows.logprobs.astype(np.float64)))
        probs /= probs.sum(1, keepdims=True)
        started = time.perf_counter()
        results = tbat_positions(W, probs, settings, workers=workers, log_every=max(1, len(probs) // 5))
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
