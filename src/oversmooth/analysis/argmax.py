"""Unargmaxable byte classes of a bottleneck head (Grivas et al. 2022; thesis appendix B), exact.

Class i is argmaxable iff some input the head can receive makes logit i strictly the largest.

**The head's real input space.** The head is `out(LayerNorm(down(h)))`, logits = W (gamma * n + beta)
with n = (x - mean(x)) / sqrt(var(x) + eps). n lies in the centred subspace {1^T n = 0} and has norm
sqrt(k) * sigma / sqrt(sigma^2 + eps) < sqrt(k); every such n is reached (x = s n for the right s > 0;
`down` is onto R^k). So with U an orthonormal basis of the centred subspace, the input set is the open
ball ||t|| < R = sqrt(k) in t-space, and logits = A t + c with A = W diag(gamma) U, c = W beta.

**Approximate test** (a pre-screen in the spirit of Grivas et al.'s braid-reflect search): from a start
point, repeatedly reflect t across the boundary between the current argmax j and i, kept inside the
ball; a class for which no input is found within `patience` steps is flagged. It never misses an
unargmaxable class but may flag argmaxable ones.

**Exact test**, for every flagged class, with HiGHS:
1. the Chebyshev-centre LP: max rho s.t. (a_i - a_j) t - rho ||a_i - a_j|| >= c_j - c_i for all j != i,
   |t|_inf <= R. rho <= tol: no input in the box (which holds the ball) makes i the argmax: unargmaxable.
2. otherwise, the least-norm input of the region, a convex QP: min ||t||^2 s.t. (a_i - a_j) t >= c_j - c_i +
   tol ||a_i - a_j||. Its norm < R: argmaxable; else i is the argmax only for inputs LayerNorm cannot
   produce: unargmaxable (reported apart as `beyond_norm`).
Every "argmaxable" verdict carries a witness t, checked by running x = s U t through the real head
(its LayerNorm and output layer, in float64).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import highspy
import numpy as np
import torch

from oversmooth.core.logs import get_logger

log = get_logger("argmax")

REFINE_ROUNDS = 60  # rounds of refining a row's direction before the LPs take it (k = 64: 99 % of rows by then)
REFINE_LIFT = 1e-3  # each round lifts the row over its rival by this much of its score
REFINE_PILOT = 256  # rows refined first: the others are only where at least half of these found a witness


@dataclass(frozen=True)
class HeadGeometry:
    """logits = A t + c for inputs t with ||t|| < radius; n = U t is the LayerNorm output before its affine map."""

    A: np.ndarray  # (V, d)
    c: np.ndarray  # (V,)
    U: np.ndarray  # (k, d)
    radius: float


def head_geometry(head: torch.nn.Module) -> HeadGeometry:
    """The input space of a `BottleneckHead` as described in the module docstring."""
    W = head.out.weight.detach().double().numpy()  # (V, k)
    gamma = head.norm.weight.detach().double().numpy()
    beta = head.norm.bias.detach().double().numpy() if head.norm.bias is not None else np.zeros(len(gamma))
    k = W.shape[1]
    U = centred_basis(k)
    c = W @ beta
    if getattr(head.out, "bias", None) is not None:
        c = c + head.out.bias.detach().double().numpy()
    return HeadGeometry((W * gamma) @ U, c, U, math.sqrt(k))


def centred_basis(k: int) -> np.ndarray:
    """Orthonormal basis (k x (k-1)) of the vectors whose entries sum to 0."""
    _, _, vt = np.linalg.svd(np.eye(k) - 1.0 / k)  # singular values 1 (k - 1 times) and 0 (the ones vector)
    return vt[: k - 1].T


@dataclass
class ArgmaxReport:
    flagged_approx: list[int] = field(default_factory=list)
    unargmaxable: list[int] = field(default_factory=list)  # exact, including beyond_norm
    beyond_norm: list[int] = field(default_factory=list)
    witnesses: dict[int, np.ndarray] = field(default_factory=dict)  # exact-test witnesses of cleared classes
    failed: list[int] = field(default_factory=list)  # solver failures: neither verdict
    seconds_approx: float = 0.0
    seconds_exact: float = 0.0


def reflection_search(geometry: HeadGeometry, i: int, patience: int, rng: np.random.Generator) -> np.ndarray | None:
    """An input t (||t|| < R) whose strict argmax is i, or None after `patience` reflections."""
    A, c, R = geometry.A, geometry.c, geometry.radius
    if A.shape[1] == 0:
        return np.zeros(0) if _strict_argmax(c) == i else None
    t = A[i] - A.mean(0)
    norm = np.linalg.norm(t)
    t = 0.9 * R * (t / norm if norm > 0 else _unit(rng.normal(size=A.shape[1])))
    for _ in range(patience + 1):
        logits = A @ t + c
        j = _strict_argmax(logits)
        if j == i:
            return t
        j = int(np.argmax(np.where(np.arange(len(c)) == i, -np.inf, logits)))
        g = A[i] - A[j]
        gap = g @ t + c[i] - c[j]  # <= 0: i is not above j
        if not g.any():
            return None
        t = t - (2 * gap / (g @ g) - 1e-9) * g  # reflect across the i/j boundary (and a hair beyond)
        norm = np.linalg.norm(t)
        if norm >= R:
            t *= (1 - 1e-6) * R / norm
    return None


def exact_argmaxable(geometry: HeadGeometry, i: int, tol: float = 1e-9) -> tuple[str, np.ndarray | None]:
    """'argmaxable' with a witness, 'unargmaxable', 'beyond_norm' (only outside the ball), or 'failed'."""
    A, c, R = geometry.A, geometry.c, geometry.radius
    others = np.arange(len(c)) != i
    G = A[i] - A[others]  # (V-1, d)
    h = c[others] - c[i]
    norms = np.linalg.norm(G, axis=1)
    if A.shape[1] == 0:
        return ("argmaxable", np.zeros(0)) if (h < 0).all() else ("unargmaxable", None)
    if (norms == 0).any() and (h[norms == 0] >= 0).any():
        return "unargmaxable", None  # an identical class with at least the same bias
    d = A.shape[1]
    # 1. Chebyshev centre in the box |t|_inf <= R: variables (t, rho), maximise rho
    status, x = _solve_lp(
        cost=np.r_[np.zeros(d), -1.0],
        rows=np.hstack([G, -norms[:, None]]),
        row_lower=h,
        col_lower=np.r_[np.full(d, -R), -np.inf],
        col_upper=np.r_[np.full(d, R), R],
    )
    if status != "optimal":
        return "failed", None
    rho, centre = x[-1], x[:d]
    if rho <= tol:
        return "unargmaxable", None
    if np.linalg.norm(centre) < R:
        return "argmaxable", centre
    # 2. the least-norm point of the region (strictly inside by tol)
    status, t = _solve_qp(G, h + tol * norms, d)
    if status == "infeasible":
        return "unargmaxable", None
    if status != "optimal":
        return "failed", None
    if np.linalg.norm(t) >= R * (1 - 1e-9):
        return "beyond_norm", None
    # the region is convex: walk from the least-norm point towards the centre, as far as the ball allows,
    # so that the witness keeps a margin a float64 forward pass can confirm
    return "argmaxable", _towards(t, centre, R * (1 - 1e-6))


def verify_witness(head: torch.nn.Module, geometry: HeadGeometry, t: np.ndarray, i: int) -> bool:
    """Run the pre-LayerNorm input that LayerNorm maps to n = U t through the real head; is i the strict argmax?"""
    n = geometry.U @ t
    k = len(n)
    eps = head.norm.eps
    ratio = float(n @ n) / k
    if ratio >= 1:
        return False
    x = torch.from_numpy(n * math.sqrt(eps / (1 - ratio)))
    with torch.no_grad():
        norm = torch.nn.functional.layer_norm(
            x, (k,), head.norm.weight.double(), None if head.norm.bias is None else head.norm.bias.double(), eps
        )
        logits = torch.nn.functional.linear(norm, head.out.weight.double())
    return _strict_argmax(logits.numpy()) == i


def unargmaxable_classes(
    head: torch.nn.Module, *, patience: int = 200, seed: int = 0, tol: float = 1e-9, geometry: HeadGeometry | None = None
) -> ArgmaxReport:
    """Approximate pre-screen of every class, then the exact test of every flagged class."""
    geometry = geometry or head_geometry(head)
    rng = np.random.default_rng(seed)
    report = ArgmaxReport()
    start = time.perf_counter()
    for i in range(len(geometry.c)):
        if reflection_search(geometry, i, patience, rng) is None:
            report.flagged_approx.append(i)
    report.seconds_approx = time.perf_counter() - start
    start = time.perf_counter()
    for i in report.flagged_approx:
        verdict, witness = exact_argmaxable(geometry, i, tol)
        if verdict == "argmaxable":
            if verify_witness(head, geometry, witness, i):
                report.witnesses[i] = witness
            else:
                report.failed.append(i)  # a witness the real head does not confirm proves nothing
        elif verdict == "failed":
            report.failed.append(i)
        else:
            report.unargmaxable.append(i)
            if verdict == "beyond_norm":
                report.beyond_norm.append(i)
    report.seconds_exact = time.perf_counter() - start
    log.info(
        "%d classes: %d flagged by the approximate test, %d unargmaxable (%d only beyond LayerNorm's norm), "
        "%d cleared with verified witnesses, %d failed; %.1f s + %.1f s",
        len(geometry.c), len(report.flagged_approx), len(report.unargmaxable), len(report.beyond_norm),
        len(report.witnesses), len(report.failed), report.seconds_approx, report.seconds_exact,
    )
    return report


def _towards(start: np.ndarray, end: np.ndarray, radius: float) -> np.ndarray:
    """The point start + lam (end - start), lam in [0, 1] as large as keeps its norm <= radius (||start|| < radius)."""
    step = end - start
    a, b, c = step @ step, 2 * start @ step, start @ start - radius**2
    if a == 0:
        return start
    lam = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)  # c < 0: one positive root
    return start + min(1.0, lam) * step


def _strict_argmax(values: np.ndarray) -> int:
    """The argmax if it is strictly larger than every other value, else -1."""
    return int(strict_argmax_of(np.array(values, dtype=np.float64)[None], 0.0)[0][0])


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _highs() -> highspy.Highs:
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h


def _pass_lp(h: highspy.Highs, cost, rows, row_lower, col_lower, col_upper) -> None:
    lp = highspy.HighsLp()
    n_rows, n_cols = rows.shape
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, col_lower, col_upper
    lp.row_lower_, lp.row_upper_ = row_lower, np.full(n_rows, highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.arange(0, n_rows * n_cols + 1, n_rows)
    lp.a_matrix_.index_ = np.tile(np.arange(n_rows), n_cols)
    lp.a_matrix_.value_ = np.asfortranarray(rows).T.reshape(-1)
    h.passModel(lp)


def _status(h: highspy.Highs) -> str:
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return "optimal"
    if status == highspy.HighsModelStatus.kInfeasible:
        return "infeasible"
    return "failed"


def _solve_lp(cost, rows, row_lower, col_lower, col_upper) -> tuple[str, np.ndarray | None]:
    h = _highs()
    _pass_lp(h, np.asarray(cost, float), rows, row_lower, np.asarray(col_lower, float), np.asarray(col_upper, float))
    h.run()
    status = _status(h)
    return status, (np.asarray(h.getSolution().col_value) if status == "optimal" else None)


def _solve_qp(G: np.ndarray, lower: np.ndarray, d: int) -> tuple[str, np.ndarray | None]:
    """min ||t||^2 s.t. G t >= lower."""
    h = _highs()
    _pass_lp(h, np.zeros(d), G, lower, np.full(d, -highspy.kHighsInf), np.full(d, highspy.kHighsInf))
    hessian = highspy.HighsHessian()
    hessian.dim_ = d
    hessian.format_ = highspy.HessianFormat.kTriangular
    hessian.start_ = np.arange(d + 1)
    hessian.index_ = np.arange(d)
    hessian.value_ = np.full(d, 2.0)
    h.passHessian(hessian)
    h.run()
    status = _status(h)
    return status, (np.asarray(h.getSolution().col_value) if status == "optimal" else None)


# ----------------------------------------------------------------------------------------------
# A head without bias over every direction (the token track)


@dataclass
class VertexReport:
    """Which rows of a point set P (V x k) are strict argmaxes of P z for some z: the vertices of conv(P) that no
    other row duplicates. `witnesses[i]`: such a z (checked over all rows); `margins[i]` for the others: the LP's
    optimal margin max over z in [-1, 1]^k of p_i . z - max over a set of other rows of p_e . z, <= tol (a
    certificate that no z makes i the argmax by more than tol); `duplicates`: rows equal to another row (never a
    strict argmax)."""

    witnesses: dict[int, np.ndarray] = field(default_factory=dict)
    margins: dict[int, float] = field(default_factory=dict)
    duplicates: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def unargmaxable(self) -> list[int]:
        return sorted([*self.margins, *self.duplicates])


def strict_argmax_rows(points: np.ndarray, directions: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """For each direction z (rows of `directions`), the row of `points` whose p . z beats every other by more than
    `tol` (-1 if none), and the best value."""
    return strict_argmax_of(directions @ points.T, tol)


def strict_argmax_of(values: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """For each row of `values` (n, V; overwritten), the column that beats every other by more than `tol` (-1 if
    none), and the best value."""
    rows = np.arange(len(values))
    best = values.argmax(1)
    top = values[rows, best]
    values[rows, best] = -np.inf  # the runner-up: two passes over the values (3x np.partition's speed)
    return np.where(top - values.max(1) > tol, best, -1), top


def linear_head_vertices(points: np.ndarray, *, n_random: int = 4096, seed: int = 0, tol: float = 1e-9,
                         chunk: int = 1024, neighbours: int = 64) -> VertexReport:
    """Exact argmaxable rows of logits = P z over all z in R^k (a head without bias whose input reaches every
    direction, as an RMSNorm-ed state through a rank-k head does).

    1. Witnesses by search: for each row's least-squares direction z_i = (P^T P)^+ p_i (the z whose scores P z
       are closest to the indicator of i: the strict argmax for all but ~0.2 % of SmolLM2's 49,152 embedding rows,
       where z = p_i wins for 10 %) and `n_random` seeded Gaussian directions, the strict argmax row is a vertex,
       with z as its witness. Then the least-squares directions of the rows left are refined, all at once: each
       round moves z_i by the least change that lifts row i over the row that beats it most, until i wins (a
       witness) or REFINE_ROUNDS pass (SmolLM2's k = 64 heads: 99 % of these rows within 60 rounds). Where most rows
       are no vertex (a low rank), nothing would win: the refinement runs on a seeded pilot of REFINE_PILOT rows and
       goes on to the others only if at least half of the pilot won.
    2. Every other row i, by LPs: maximise p_i . z - u subject to p_e . z <= u for the rows e in the LP, z in
       [-1, 1]^k, u >= -max_e |p_e|_1 (never binding: it only bounds the LP while its rows are few). Optimal
       margin <= tol: no direction lifts i above those rows, so none lifts it above all rows (unargmaxable).
       Otherwise the optimal z lifts i above them: if i is also the strict argmax over all rows, z is its witness;
       if not, the rows that beat i at z join the LP and i is solved again. Two ways to choose the rows:
       - few vertices, many undecided rows (a low rank): one HiGHS model for all (Clarkson's method), from the
         vertices the random directions found (all found: 20-30 % slower per LP at k = 16), each solve
         warm-started with only the cost changed; a round adds the argmax at z (a vertex not in the LP);
       - more vertices than undecided rows (near full rank, where nearly every row is a vertex and one model of
         them all would be as large as P): a model per row, from the `neighbours` rows that score highest at its
         least-squares direction, a round adding up to `neighbours` of the rows that beat it (cutting planes).
    """
    started = time.perf_counter()
    points = np.asarray(points, dtype=np.float64)
    V, k = points.shape
    reach = np.abs(points).sum(1).max()  # |p . z| <= this for z in the box
    tol = tol * reach
    report = VertexReport()
    _, inverse, counts = np.unique(points, axis=0, return_inverse=True, return_counts=True)
    duplicated = counts[inverse.reshape(-1)] > 1  # equal rows tie: none of the copies is ever the strict argmax
    report.duplicates = np.flatnonzero(duplicated).tolist()
    rng = np.random.default_rng(seed)
    random = [rng.standard_normal((min(chunk, n_random - s), k)) for s in range(0, n_random, chunk)]
    for directions in random:
        _witness_winners(points, directions, tol, report)
    by_random = list(report.witnesses)  # the shared LP's first rows: the others join as LPs meet them
    least_squares = np.linalg.pinv(points.T @ points)
    for start in range(0, V, chunk):
        _witness_winners(points, points[start : start + chunk] @ least_squares, tol, report)
        if start // chunk % 10 == 9:
            log.info("search: %d/%d rows' directions, %d vertices, %.1f s", start + chunk, V, len(report.witnesses),
                     time.perf_counter() - started)
    log.info("%d rows in R^%d: %d vertices by search (%d by the random directions), %d duplicated rows, %.1f s", V, k,
             len(report.witnesses), len(by_random), len(report.duplicates), time.perf_counter() - started)
    undecided = [i for i in range(V) if i not in report.witnesses and not duplicated[i]]
    if undecided:
        pilot = rng.choice(undecided, min(REFINE_PILOT, len(undecided)), replace=False)
        _refined_witnesses(points, least_squares, pilot, tol, report)
        won = np.isin(pilot, list(report.witnesses)).mean()
        log.info("refined directions: %.0f %% of a pilot of %d rows won", 100 * won, len(pilot))
        if won >= 0.5:
            _refined_witnesses(points, least_squares, [i for i in undecided if i not in report.witnesses], tol, report)
        undecided = [i for i in undecided if i not in report.witnesses]
        log.info("refined directions: %d rows undecided, %.1f s", len(undecided), time.perf_counter() - started)
    shared = _VertexLP(points, by_random, -reach) if len(undecided) > len(report.witnesses) else None
    for n, i in enumerate(undecided):
        if shared is not None:
            _lift_until_decided(shared, i, points, tol, report, added=1)
        elif i not in report.witnesses:  # a row an earlier LP met as a vertex is decided already
            lp = _VertexLP(points, _best_scoring_rows(points, i, points[i] @ least_squares, neighbours), -reach)
            _lift_until_decided(lp, i, points, tol, report, added=neighbours)
        if (n + 1) % 5000 == 0:
            log.info("LPs: %d/%d rows decided, %.1f s", n + 1, len(undecided), time.perf_counter() - started)
    report.failed = [i for i in report.failed if i not in report.witnesses]  # a later LP met it as a vertex
    report.seconds = time.perf_counter() - started
    log.info("%d rows: %d argmaxable (witnesses), %d unargmaxable (%d duplicated), %d failed, %.1f s", V,
             len(report.witnesses), len(report.unargmaxable), len(report.duplicates), len(report.failed),
             report.seconds)
    return report


def _best_scoring_rows(points: np.ndarray, i: int, z: np.ndarray, count: int) -> list[int]:
    """The `count` rows other than i that score highest at z (all the others where there are fewer)."""
    scores = points @ z
    scores[i] = -np.inf
    count = min(count, len(points) - 1)
    return [int(e) for e in np.argpartition(-scores, count - 1)[:count] if e != i] if count > 0 else []


def _lift_until_decided(lp: _VertexLP, i: int, points: np.ndarray, tol: float, report: VertexReport,
                        added: int) -> None:
    """Decide row i by `lp`, adding the rows that beat it at the LP's direction (the argmax first, up to `added`
    of them) until a witness, a certificate (margin <= tol) or a failure."""
    while i not in report.witnesses:
        status, z, margin = lp.lift(i)
        if status != "optimal":
            report.failed.append(i)
            return
        if margin <= tol:
            report.margins[i] = margin
            return
        scores = points @ z
        j = int(strict_argmax_of(scores[None].copy(), tol)[0][0])
        if j == i:
            report.witnesses[i] = z
            return
        if j < 0 or j in lp.index:  # a tie at the top (no strict argmax), or solver tolerance
            report.failed.append(i)
            return
        report.witnesses[j] = z  # a vertex, lifted above every other row by z
        beat = np.flatnonzero(scores >= scores[i] - tol)
        beat = beat[(beat != i) & (beat != j)]
        for e in [j, *beat[np.argsort(-scores[beat], kind="stable")][: added - 1].tolist()]:
            if e not in lp.index:
                lp.add(e)


def _refined_witnesses(points: np.ndarray, least_squares: np.ndarray, rows, tol: float, report: VertexReport,
                       chunk: int = 256) -> None:
    """Witnesses for `rows` by refining their least-squares directions: each round moves z_i by the least change
    (in the metric of (P^T P)^+) that lifts row i a little over the row that beats it most, until i is the strict
    argmax (a witness) or REFINE_ROUNDS pass; the rows left go on to the LPs."""
    rows = np.asarray(rows, dtype=np.int64)
    for start in range(0, len(rows), chunk):
        at, Z = rows[start : start + chunk], points[rows[start : start + chunk]] @ least_squares
        for _ in range(REFINE_ROUNDS):
            scores = Z @ points.T
            index = np.arange(len(at))
            own = scores[index, at].copy()
            scores[index, at] = -np.inf
            rival = scores.argmax(1)
            gap = scores[index, rival] - own
            for z, i in zip(Z[gap < -tol], at[gap < -tol]):
                report.witnesses[int(i)] = z
            apart = points[at] - points[rival]
            step = apart @ least_squares
            length = np.einsum("ij,ij->i", step, apart)
            going = (gap >= -tol) & (length > 0)
            if not going.any():
                break
            at, Z, step = at[going], Z[going], step[going]
            Z += ((gap[going] + REFINE_LIFT * np.abs(own[going]) + tol) / length[going])[:, None] * step


def _witness_winners(points: np.ndarray, directions: np.ndarray, tol: float, report: VertexReport) -> None:
    """Record each direction's strict argmax row (a vertex) with the direction as its witness, unless it has one."""
    winners, _ = strict_argmax_rows(points, directions, tol)
    for z, i in zip(directions, winners):
        if i >= 0 and i not in report.witnesses:
            report.witnesses[int(i)] = z


class _VertexLP:
    """max p_i . z - u s.t. p_e . z - u <= 0 for the rows e in the LP (vertices found, or a row's best-scoring
    rows), z in [-1, 1]^k, u >= -max_e |p_e|_1 (no row scores below it in the box): one HiGHS model, rows added as
    the LPs find rows that beat i, each solve warm-started with only the cost changed."""

    def __init__(self, points: np.ndarray, rows: list[int], floor: float):
        k = points.shape[1]
        self.points, self.index, self.k = points, {}, k
        self.vertex_points = np.empty((max(len(rows), 64), k))  # the rows of `index`, in order; grown by doubling
        self.columns = np.arange(k + 1, dtype=np.int32)
        self.h = _highs()
        self.h.setOptionValue("simplex_strategy", 4)  # primal: only the cost changes between solves (~20 % faster)
        self.h.addVars(k + 1, np.r_[np.full(k, -1.0), floor], np.r_[np.ones(k), highspy.kHighsInf])
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        for row in rows:
            self.add(row)

    def add(self, row: int) -> None:
        if len(self.index) == len(self.vertex_points):
            self.vertex_points = np.concatenate([self.vertex_points, np.empty_like(self.vertex_points)])
        self.vertex_points[len(self.index)] = self.points[row]
        self.index[row] = len(self.index)
        self.h.addRow(-highspy.kHighsInf, 0.0, self.k + 1, self.columns, np.r_[self.points[row], -1.0])

    def lift(self, i: int) -> tuple[str, np.ndarray | None, float]:
        """(status, z, margin of row i over the vertices at z)."""
        p = self.points[i]
        self.h.changeColsCost(self.k + 1, self.columns, np.r_[p, -1.0])
        self.h.run()
        status = _status(self.h)
        if status != "optimal":
            return status, None, math.nan
        z = np.asarray(self.h.getSolution().col_value)[: self.k]
        return status, z, float(p @ z - (self.vertex_points[: len(self.index)] @ z).max(initial=-math.inf))


def vertex_record(model: str, report: VertexReport, k: int) -> dict:
    """The JSON record of one bias-free head (token ids; the witnesses themselves are not kept)."""
    return {
        "model": model,
        "k": k,
        "n_rows": len(report.witnesses) + len(report.unargmaxable) + len(report.failed),
        "argmaxable": sorted(report.witnesses),
        "unargmaxable": report.unargmaxable,
        "duplicates": report.duplicates,
        "failed": report.failed,
        "max_margin": max(report.margins.values(), default=None),
    }  # no seconds (the log has them): the same head gives the same bytes


def report_record(model: str, report: ArgmaxReport, k: int) -> dict:
    """The JSON record of one model (bytes as numbers; names are added by the table)."""
    return {
        "model": model,
        "k": k,
        "unargmaxable": report.unargmaxable,
        "beyond_norm": report.beyond_norm,
        "flagged_approx": report.flagged_approx,
        "cleared_with_witness": sorted(report.witnesses),
        "failed": report.failed,
    }  # no seconds (the log has them): the same model gives the same bytes
