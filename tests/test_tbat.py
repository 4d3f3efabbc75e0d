"""TBAT: the fast exact solver against the definition (one linprog per byte), hand-made cases, full rank."""

import numpy as np
import pytest
import scipy.optimize
import threadpoolctl

from oversmooth.analysis import tbat
from oversmooth.analysis.bat import descent, lp, polish, projections, repair, screen, settings
from oversmooth.analysis.bat.polytope import Polytope, dual_bounds, row_basis
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.bat.solver import BATSolver
from oversmooth.analysis.reference import bat_reject_set
from oversmooth.analysis.tbat import one_blas_thread, tbat_positions
from oversmooth.extraction.logit_tables import sample_positions


def random_instance(V, k, seed, scale=3.0):
    """A head W (V x k) and an output p = softmax(W z) of it, as a trained bottleneck would give."""
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(V, k))
    logits = scale * W @ rng.normal(size=k) / np.sqrt(k)
    p = np.exp(logits - logits.max())
    return W, p / p.sum()


def test_hand_made_three_byte_case():
    W = np.array([[1.0], [0.0], [0.0]])  # W^T q = q_0: the first byte's mass is pinned, bytes 1 and 2 trade
    p = np.array([0.5, 0.3, 0.2])
    # threshold 0.5: u = (1, 0.6, 0.4); q_1 + q_2 = 0.5 allows q_2 = 0 but not q_1 = 0
    result = BATSolver(W, TBATSettings(threshold=0.5)).reject_set(p)
    assert result.rejected.tolist() == [False, False, True]
    assert result.tbat(p) == pytest.approx(0.2)
    # threshold 0.2: u = (0.625, 0.375, 0.25); q_1 >= 0.25 and q_2 >= 0.125, nothing can vanish
    assert not BATSolver(W, TBATSettings(threshold=0.2)).reject_set(p).rejected.any()
    for threshold in (0.5, 0.2):
        reference, failures = bat_reject_set(p, W, threshold=threshold)
        assert not failures
        assert np.array_equal(reference, BATSolver(W, TBATSettings(threshold=threshold)).reject_set(p).rejected)


def gap_instance(minimum: float, threshold: float = 0.2) -> tuple[np.ndarray, np.ndarray]:
    """Three bytes whose P is a segment, q = p + t (1, -2, 1) (W^T = (0, 1, 2) and the sum fixed), where min q_0 =
    p_0 - c p_1 / 2 (c = threshold / (1 - threshold)): byte 1 reaches its bound u_1 = (1 + c) p_1 first. A byte 0 at
    exact minimum `minimum`."""
    c = threshold / (1 - threshold)
    p1 = 0.1
    p0 = c * p1 / 2 + minimum
    return np.array([[0.0], [1.0], [2.0]]), np.array([p0, p1, 1 - p0 - p1])


@pytest.mark.parametrize("minimum, rejected", [(0.0, True), (1.5e-10, True), (5e-10, True), (5e-9, False)])
def test_a_byte_is_rejected_iff_its_exact_minimum_is_at_most_zero_tol_not_only_where_it_is_zero(minimum, rejected):
    """What the solver decides, as the definition's LP does: min q_i <= `zero_tol` (1e-9, absolute), so a byte whose
    exact minimum over P is 1.5e-10 or 5e-10 (no q in P zeroes it) is rejected, one at 5e-9 accepted."""
    W, p = gap_instance(minimum)
    assert p[0] <= 0.2
    assert BATSolver(W).reject_set(p).rejected[0] == rejected
    reference, failures = bat_reject_set(p, W)
    assert not failures and reference[0] == rejected


def test_a_zero_tol_below_the_gap_accepts_the_byte_the_default_rejects():
    W, p = gap_instance(5e-10)
    tight = TBATSettings(zero_tol=1e-12, certificate_margin=1e-12, feasibility_tol=1e-12)
    assert BATSolver(W).reject_set(p).rejected[0] and not BATSolver(W, tight).reject_set(p).rejected[0]


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16, 32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fast_reject_sets_equal_the_definition_on_random_instances(k, seed):
    W, p = random_instance(64, k, seed)
    expected, failures = bat_reject_set(p, W)
    result = BATSolver(W).reject_set(p)
    assert not failures and not result.failed
    assert np.array_equal(result.rejected, expected)


def test_the_definition_by_highs_interior_point_method_gives_its_simplexs_set():
    # benchmarks/tbat_speed.py checks the full head's tokens this way (its simplex: over 28 minutes on one token)
    W, p = random_instance(256, 16, 11, scale=6.0)
    simplex, failures = bat_reject_set(p, W)
    interior, interior_failures = bat_reject_set(p, W, method="highs-ipm")
    assert not failures and not interior_failures
    assert np.array_equal(interior, simplex) and 0 < simplex.sum() < 256


@pytest.mark.parametrize("k,seed", [(4, 10), (16, 11), (32, 12)])
def test_fast_reject_sets_equal_the_definition_at_full_vocabulary(k, seed):
    W, p = random_instance(256, k, seed, scale=6.0)
    expected, failures = bat_reject_set(p, W)
    result = BATSolver(W).reject_set(p)
    assert not failures and not result.failed
    assert np.array_equal(result.rejected, expected)
    assert 0 < expected.sum() < 256  # a case with both verdicts


def test_a_vocabulary_beyond_the_certificate_directions_cap_gives_the_definitions_set():
    # 600 tokens > MAX_DIRECTIONS: certificates only for the most probable, in chunks; every token checked
    W, p = random_instance(600, 16, 13, scale=4.0)  # 586 undecided at first, 9 accepted
    expected, failures = bat_reject_set(p, W)
    result = BATSolver(W).reject_set(p)
    assert not failures and not result.failed
    assert np.array_equal(result.rejected, expected) and 0 < expected.sum() < 600


def test_large_vocabulary_with_negligible_tokens_agrees_with_the_definition_on_a_subsample():
    # a token-track-like output: 6,000 tokens, many below zero_tol; the definition on every accepted token and
    # on 40 random rejected ones (one linprog over 6,000 columns each)
    W, p = random_instance(6000, 8, 14, scale=12.0)
    assert (p / 0.8 <= 1e-9).sum() > 100
    result = BATSolver(W).reject_set(p)
    assert not result.failed
    accepted = np.flatnonzero(~result.rejected)
    rejected = np.random.default_rng(0).choice(np.flatnonzero(result.rejected), 40, replace=False)
    chosen = np.concatenate([accepted, rejected])
    expected, failures = bat_reject_set(p, W, tokens=chosen)
    assert not failures and 0 < len(accepted) < 6000
    assert np.array_equal(expected[chosen], result.rejected[chosen])


def screen_witness(W, p, i, power):
    """The screen's witness for token i, from its formula: q_i = 0, q_l = p_l + a w_l K_li for l != i, w = p^power,
    K = Q^T M^+ Q, M = Q diag(w) Q^T, a = p_i / (1 - w_i K_ii)."""
    Q, w = row_basis(W, 1e-10), p**power
    K_i = Q.T @ (np.linalg.pinv((Q * w) @ Q.T) @ Q[:, i])
    q = p + p[i] / (1 - w[i] * K_i[i]) * w * K_i
    q[i] = 0.0
    return q


def test_every_token_the_screen_rejects_has_the_witness_its_formula_gives():
    """The screen rejects without an LP: for each token it rejects, one of its moves (w = p, p^1.5, p^2), rebuilt
    here from the formula, is a witness: A q = A p and 0 <= q <= u."""
    W, p = random_instance(3000, 32, 21, scale=6.0)
    solver, u = BATSolver(W), p / 0.8
    undecided, rejected = (p <= 0.2) & (u > 1e-9), u <= 1e-9
    before = undecided.copy()
    solver.screen_and_repair(solver.polytope(p), undecided, rejected)
    screened = np.flatnonzero(before & rejected)
    assert len(screened) > 1300  # of 1,441 undecided: most of the tail, without an LP
    A = np.vstack([W.T, np.ones(len(p))])

    def is_witness(q):
        return np.abs(A @ q - A @ p).max() < 1e-9 and q.min() >= -1e-12 and (q - u).max() <= 1e-12

    for i in screened[:: len(screened) // 50]:
        assert any(is_witness(screen_witness(W, p, i, power)) for power in settings.SCREEN_POWERS)


def screened(W, p):
    """The tokens the screen rejects (its repairs included) and how many it leaves undecided."""
    u = p / 0.8
    undecided, rejected = (p <= 0.2) & (u > 1e-9), u <= 1e-9
    before = undecided.copy()
    solver = BATSolver(W)
    repaired, _ = solver.screen_and_repair(solver.polytope(p), undecided, rejected)
    return np.flatnonzero(before & rejected), int(undecided.sum()), repaired


def test_tokens_only_the_repair_rejects_are_rejected_by_the_definition(monkeypatch):
    """The repair pins the tokens a move pushed out of [0, u] and moves the others again: its witnesses reject
    tokens the plain moves leave, and the definition (one LP per token) rejects each of them too."""
    W, p = random_instance(2500, 16, 5, scale=4.0)
    with_repair, left, repaired = screened(W, p)
    monkeypatch.setattr(settings, "REPAIR_ROUNDS", 0)
    plain, plain_left, none = screened(W, p)
    only_repair = np.setdiff1d(with_repair, plain)
    assert none == 0 and repaired == len(only_repair) >= 10 and left == plain_left - repaired
    assert np.isin(plain, with_repair).all()
    expected, failures = bat_reject_set(p, W, tokens=only_repair)
    assert not failures and expected[only_repair].all()


def test_a_repair_that_would_pin_too_many_tokens_gives_up_and_leaves_the_token_undecided(monkeypatch):
    W, p = random_instance(2500, 16, 5, scale=4.0)
    monkeypatch.setattr(settings, "REPAIR_ROUNDS", 0)
    plain, plain_left, _ = screened(W, p)
    monkeypatch.setattr(settings, "REPAIR_ROUNDS", 12)
    monkeypatch.setattr(settings, "REPAIR_FIXED", 1)  # token i itself: any token crossing its bound is one too many
    rejected, left, repaired = screened(W, p)
    assert repaired == 0 and left == plain_left and np.array_equal(rejected, plain)


def test_tokens_of_mass_below_the_lp_tolerance_are_rejected_only_with_a_move_that_meets_a_p(monkeypatch):
    # dropping a token of mass ~5e-8 misses A p by less than the LPs' absolute tolerance (1e-8) with no move at
    # all: the repair's check is relative to the mass moved. 256 tokens at k = 64 through the large-vocabulary
    # path (where the repair runs); an absolute check rejected 14 tokens of mass 2e-8 to 7e-8 the definition accepts
    monkeypatch.setattr(settings, "FULL_LP_COLUMNS", 100)
    W, p = random_instance(256, 64, 101, scale=6.0)
    result = BATSolver(W).reject_set(p)
    expected, failures = bat_reject_set(p, W)
    tiny = (p < 1e-7) & (p / 0.8 > 1e-9)
    assert not failures and not result.failed and (tiny & ~expected).sum() > 10
    assert np.array_equal(result.rejected, expected)


def test_a_repair_that_pins_tokens_with_equal_rows_gives_the_definitions_sets(monkeypatch):
    # every token twice (equal rows of W, equal mass): a repair that pins both of a pair has diag(1 / w_F) - K_FF
    # singular or nearly; it raised LinAlgError in a smoke run's TBAT job (bn-64@10 on the teacher's language).
    # 256 tokens through the large-vocabulary path, where the repair runs
    monkeypatch.setattr(settings, "FULL_LP_COLUMNS", 100)
    asked = []  # every direction the repair asked for
    direction = repair.Pinned.direction
    monkeypatch.setattr(repair.Pinned, "direction", lambda self, Z, w: asked.append(y := direction(self, Z, w)) or y)
    rng = np.random.default_rng(0)
    W = np.repeat(rng.normal(size=(128, 16)), 2, axis=0)
    logits = 3 * W @ rng.normal(size=16) / 4
    p = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    result = BATSolver(W).reject_set(p)
    expected, failures = bat_reject_set(p, W)
    # exactly singular only under the rounding of a multi-threaded BLAS (with one thread, nearly: the repair goes on
    # and its q is checked); either way the same sets as the definition
    assert len(asked) > 0 and result.stats["repaired"] > 0
    assert not failures and not result.failed and np.array_equal(result.rejected, expected)


def test_a_pinned_pair_whose_system_is_exactly_singular_gives_no_direction():
    # two pinned tokens with equal columns z of Z and w = 1: diag(1 / w_F) - K_FF = [[1 - a, -a], [-a, 1 - a]] with
    # a = z.z = 0.5 exactly, a singular matrix under any rounding
    Z = np.array([[0.5, 0.5, 0.1], [0.5, 0.5, 0.2]])
    assert repair.Pinned([0, 1], [-0.1, 0.05]).direction(Z, np.ones(3)) is None
    assert repair.Pinned([0, 2], [-0.1, 0.05]).direction(Z, np.ones(3)) is not None  # a regular pair gives one


def test_witnesses_checked_in_batches_judge_each_move_alone(monkeypatch):
    # the screen's and the descent's candidate q's go through one product per WITNESS_BATCH rows: a batch that
    # holds a witness and two near-misses must accept the witness only, across a batch boundary
    monkeypatch.setattr(settings, "WITNESS_BATCH", 2)
    W, p = random_instance(60, 3, 2)
    A, u = np.vstack([W.T, np.ones(len(p))]), p / 0.8
    lp = [scipy.optimize.linprog(np.eye(len(p))[i], A_eq=A, b_eq=A @ p, bounds=np.c_[np.zeros(len(p)), u],
                                 method="highs") for i in range(len(p))]
    i = next(i for i, r in enumerate(lp) if r.fun <= 1e-12)  # a rejected token: its optimum q is a witness
    j = next(j for j in range(len(p)) if lp[i].x[j] > 1e-3 and j != i)  # a token that witness leaves above 0
    q = np.clip(lp[i].x, 0.0, u)
    q[i] = 0.0
    off = q.copy()
    off[j] += 1e-6  # A q misses A p by about 1e-6
    solver = BATSolver(W)
    found = solver.polytope(p).witnesses(np.stack([off, q, q]), np.array([i, i, j]))
    assert found.tolist() == [False, True, False]  # q is no witness for j: zeroing q_j moves A q


def recorded_witnesses(monkeypatch) -> list:
    """Every witness the solver's checks accept from now on, as (token, support, q on the support)."""
    witnesses, check = [], Polytope.witnesses

    def recorded(P, q_support, tokens):
        found = check(P, q_support, tokens)
        witnesses.extend((i, P.support, q.copy()) for i, q, ok in zip(tokens, q_support, found) if ok)
        return found

    monkeypatch.setattr(Polytope, "witnesses", recorded)
    return witnesses


def assert_each_witness_meets_every_constraint(witnesses, W, p):
    A, u = np.vstack([W.T, np.ones(len(p))]), p / 0.8
    for i, support, q_support in witnesses:
        q = np.zeros(len(p))
        q[support] = q_support
        q[i] = 0.0  # the q that `Polytope.witnesses` checked: 0 at its token
        assert q.min() >= 0 and (q - u).max() <= 0 and np.abs(A @ q - A @ p).max() < 1e-9


def plain_moves_then_descent(W, p, monkeypatch):
    """The tokens the move with w = p leaves (no other move, no repair), and the solver's state after the descent
    on them, with the q of every witness it accepted (token, q)."""
    monkeypatch.setattr(settings, "SCREEN_POWERS", (1.0,))
    monkeypatch.setattr(settings, "REPAIR_POWERS", (1.0,))
    monkeypatch.setattr(settings, "REPAIR_ROUNDS", 0)
    solver, u = BATSolver(W), p / 0.8
    witnesses = recorded_witnesses(monkeypatch)
    undecided, rejected = (p <= 0.2) & (u > 1e-9), u <= 1e-9
    P = solver.polytope(p)
    _, Z = solver.screen_and_repair(P, undecided, rejected)
    left = np.flatnonzero(undecided)
    _, directions = descent.descend(P, Z, undecided, rejected)
    assert sorted(directions) == np.flatnonzero(undecided).tolist()  # a direction for every token it left
    return left, undecided, rejected, witnesses, solver, directions


def test_the_descents_witnesses_and_certificates_give_the_definitions_answers(monkeypatch):
    """The dual descent settles the tokens the move left: each rejection by a q that meets every constraint
    (checked here again), each acceptance by a certificate; the definition (one LP per token) agrees."""
    W, p = random_instance(2500, 16, 5, scale=4.0)
    left, undecided, rejected, witnesses, *_ = plain_moves_then_descent(W, p, monkeypatch)
    assert len(left) == 21 and not undecided[left].any()
    assert rejected[left].sum() == len(witnesses) == 19  # 2 accepted
    expected, failures = bat_reject_set(p, W, tokens=left)
    assert not failures and np.array_equal(expected[left], rejected[left])
    assert_each_witness_meets_every_constraint(witnesses, W, p)


@pytest.mark.parametrize("rows", [100, 0])
def test_the_screen_moves_and_repairs_in_proportion_to_p_alone_where_the_descent_follows(monkeypatch, rows):
    monkeypatch.setattr(settings, "DESCENT_ROWS", rows)  # 49 rows: the descent follows where this is 0
    weights, whitened, repaired = [], screen.whitened, repair.repair
    monkeypatch.setattr(screen, "whitened", lambda P, w, *args: weights.append(("move", w)) or whitened(P, w, *args))
    monkeypatch.setattr(repair, "repair", lambda P, Z, w, *args: weights.append(("repair", w))
                        or repaired(P, Z, w, *args))
    W, p = random_instance(4000, 48, 2, scale=6.0)
    BATSolver(W).reject_set(p)
    powers = [(step, round(float(np.log(w[0]) / np.log(p[0])), 6)) for step, w in weights]  # p > 0 everywhere
    expected = [("move", 1.0), ("repair", 1.0)] if rows == 0 else \
        [("move", 1.0), ("move", 1.5), ("move", 2.0), ("repair", 1.0), ("repair", 1.5)]
    assert powers == expected


def test_onto_plane_moves_each_point_to_the_nearest_one_with_a_q_equal_to_a_p_and_q_i_zero():
    W, p = random_instance(300, 8, 1)
    solver, at = BATSolver(W), np.array([3, 7])
    Z, K, _ = screen.whitened(solver.polytope(p), p, at)  # every token in the support
    q = p * np.random.default_rng(0).uniform(0, 1.25, size=(2, len(p)))
    q[[0, 1], at] = 0.0
    moved = projections.onto_plane(q, p, Z, Z[:, at].T, at, 1 - p[at] * K[at])  # every token in the support
    A = np.vstack([W.T, np.ones(len(p))])
    for point, i, m in zip(q, at, moved):
        # the nearest point in the p-weighted norm (KKT): m_l = q_l + p_l (A_l . lam) for l != i, A m = A p
        others = np.arange(len(p)) != i
        Ao = A[:, others]
        lam = np.linalg.solve(Ao @ (p[others, None] * Ao.T), A @ p - Ao @ point[others])
        expected = point.copy()
        expected[others] += p[others] * (Ao.T @ lam)
        assert m[i] == 0 and np.abs(A @ m - A @ p).max() < 1e-10 and np.abs(m - expected).max() < 1e-12


def projected_after_the_move(W, p, monkeypatch):
    """The tokens the move and repair leave where the descent runs, the solver's state after the alternating
    projections on them, and the q of every witness checked (token, q)."""
    monkeypatch.setattr(settings, "DESCENT_ROWS", 0)
    solver, u = BATSolver(W), p / 0.8
    witnesses = recorded_witnesses(monkeypatch)
    undecided, rejected = (p <= 0.2) & (u > 1e-9), u <= 1e-9
    P = solver.polytope(p)
    _, Z = solver.screen_and_repair(P, undecided, rejected)
    left, witnesses[:] = np.flatnonzero(undecided), []
    found = projections.project(P, Z, undecided, rejected)
    return left, undecided, rejected, witnesses, found


def test_the_projections_witnesses_meet_every_constraint_and_the_definition_rejects_their_tokens(monkeypatch):
    # the move and its repair leave 27 tokens, 17 of them rejected by the definition: the projections reject 15
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, witnesses, found = projected_after_the_move(W, p, monkeypatch)
    assert len(left) == 27 and found == rejected[left].sum() == len(witnesses) == 15 and undecided[left].sum() == 12
    expected, failures = bat_reject_set(p, W, tokens=left)
    assert not failures and expected[left[rejected[left]]].all() and expected[left].sum() == 17
    assert_each_witness_meets_every_constraint(witnesses, W, p)


def test_a_projection_whose_witness_fails_its_check_rejects_nothing(monkeypatch):
    monkeypatch.setattr(Polytope, "witnesses", lambda self, q, *args: np.zeros(len(q), dtype=bool))
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, _, found = projected_after_the_move(W, p, monkeypatch)
    assert found == 0 and not rejected[left].any() and undecided[left].all()


def test_a_token_whose_plane_point_was_checked_leaves_the_projections(monkeypatch):
    # a check that fails once would fail again from the next round's nearly equal point: each token is checked once
    checked, check, project = [], Polytope.witnesses, projections.project

    def failing_in_the_projections(self, q, tokens, *args):
        if not projecting:
            return check(self, q, tokens, *args)
        checked.extend(tokens.tolist())
        return np.zeros(len(q), dtype=bool)

    projecting = []
    monkeypatch.setattr(Polytope, "witnesses", failing_in_the_projections)
    monkeypatch.setattr(projections, "project", lambda *args: projecting.append(1) or project(*args))
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, _, found = projected_after_the_move(W, p, monkeypatch)
    assert len(left) == 27 and found == 0 and not rejected[left].any()
    assert len(checked) == len(set(checked)) == 15 and set(checked) <= set(left.tolist())  # 513 checks if they stayed


def test_no_projection_where_the_screen_inverts_m_on_part_of_its_range(monkeypatch):
    # a plane point would miss A p along the directions left out, and fail its check (SmolLM2's head under
    # temperature 0.8: 477 tokens, 40 rounds, none rejected, 81 s): no round at all
    monkeypatch.setattr(settings, "SCREEN_CONDITION", 10.0)
    calls, onto_plane = [], projections.onto_plane
    monkeypatch.setattr(projections, "onto_plane", lambda *args: calls.append(1) or onto_plane(*args))
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, witnesses, found = projected_after_the_move(W, p, monkeypatch)
    assert len(left) > 0 and found == 0 and not calls and undecided[left].all()


def test_reject_set_with_the_projections_gives_the_set_without_them(monkeypatch):
    monkeypatch.setattr(settings, "DESCENT_ROWS", 0)
    W, p = random_instance(4000, 48, 2, scale=6.0)
    projected = BATSolver(W).reject_set(p)
    monkeypatch.setattr(settings, "PROJECTION_ROUNDS", 0)
    plain = BATSolver(W).reject_set(p)
    assert projected.stats["projected"] == 15 and plain.stats["projected"] == 0 and not projected.failed
    assert np.array_equal(projected.rejected, plain.rejected)


def test_the_descents_momentum_restarts_only_where_it_carried_the_iterate_uphill():
    # columns are tokens; the gradient step from y is y - step = (1, 0) for both; the last move step - x is
    # (1, 0) for the first (the same way: uphill, momentum reset to 1) and (-1, 0) for the second (kept)
    y, step = np.array([[1.0, 1.0], [0.0, 0.0]]), np.zeros((2, 2))
    x = np.array([[-1.0, 1.0], [0.0, 0.0]])
    assert descent.restarted(np.array([3.5, 3.5]), y, step, x).tolist() == [1.0, 3.5]
    # orthogonal moves (dot product 0) keep their momentum
    assert descent.restarted(np.array([2.0]), np.array([[1.0], [0.0]]), np.zeros((2, 1)),
                           np.array([[0.0], [-1.0]])).tolist() == [2.0]


def test_the_descent_takes_every_undecided_token_a_chunk_at_a_time(monkeypatch):
    # more tokens left than DESCENT_TOKENS: the less probable ones used to get no descent and no direction (so no
    # polish), and went to the dense LPs (SmolLM2's head: 378 tokens at one position, over 24 minutes)
    monkeypatch.setattr(settings, "DESCENT_TOKENS", 8)
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, *_, directions = plain_moves_then_descent(W, p, monkeypatch)
    assert len(left) > 2 * 8 and len(directions) == undecided.sum() > 8  # the helper: one for every token left


def test_the_descents_tail_sample_cuts_the_tail_into_strata_of_equal_mass():
    # cumulative masses 0.5, 0.6, 0.9, 1.0; 3 strata of 1/3, middles 1/6, 1/2, 5/6: token 0 (twice; its mass ends at
    # 0.5, a middle on it counts), then token 2; each stands for the strata it took
    p = np.array([0.5, 0.1, 0.3, 0.1])
    tokens, weights = descent.mass_sample(p, np.arange(4), 3)
    assert tokens.tolist() == [0, 2] and np.allclose(weights, [2 / 3, 1 / 3])
    tokens, weights = descent.mass_sample(p, np.arange(4), 2)  # middles 0.25, 0.75
    assert tokens.tolist() == [0, 2] and np.allclose(weights, [0.5, 0.5])
    tokens, weights = descent.mass_sample(p, np.array([1, 3]), 2)  # no more tokens than the sample: all, as they are
    assert tokens.tolist() == [1, 3] and weights.tolist() == [0.1, 0.1]


def recorded_iterations(monkeypatch) -> list:
    """The dtype of every kink-slope evaluation: float32 for each of the descent's iterations, float64 at its checks."""
    iterations, slopes = [], descent.kink_slopes
    monkeypatch.setattr(descent, "kink_slopes", lambda s, *args: iterations.append(s.dtype) or slopes(s, *args))
    return iterations


def test_a_token_whose_bounds_stall_leaves_the_descent_at_that_check(monkeypatch):
    # with any gain counted as a stall every token leaves at its second check (the first has none before it to
    # compare): 2 x DESCENT_CHECK iterations where 1,000 would run, and a direction for each token left (the polish's)
    monkeypatch.setattr(settings, "DESCENT_STALL", np.inf)
    iterations = recorded_iterations(monkeypatch)
    W, p = random_instance(4000, 48, 2, scale=6.0)  # 49 tokens left by the move; 1,000 iterations leave 27
    left, undecided, *_, directions = plain_moves_then_descent(W, p, monkeypatch)
    assert len(left) == 49 and iterations.count(np.float32) == 2 * settings.DESCENT_CHECK  # one chunk's iterations
    assert sorted(directions) == np.flatnonzero(undecided).tolist() and len(directions) == 43  # the default: 27


def test_tokens_below_the_descents_floor_get_their_least_squares_direction_without_its_iterations(monkeypatch):
    # at temperature 0.8 the descent settled none of 280 tokens of mass below 1e-6 (30 s a chunk): they go to the
    # polish with the direction the descent would have started from, s = K_i / K_ii (s_i = 1), none rejected here
    monkeypatch.setattr(settings, "DESCENT_FLOOR", 1.0)  # every token below it
    iterations = recorded_iterations(monkeypatch)
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, witnesses, solver, directions = plain_moves_then_descent(W, p, monkeypatch)
    assert not iterations and not witnesses and sorted(directions) == left.tolist() and len(left) == 49
    Q = solver.Q
    for i, s in directions.items():  # Q^T M^-1 Q_i / (Q_i^T M^-1 Q_i), M = Q diag(p) Q^T
        expected = Q.T @ np.linalg.solve(Q @ (p[:, None] * Q.T), Q[:, i])
        assert s[i] == pytest.approx(1.0) and np.allclose(s, expected / expected[i], atol=1e-8)


def shorten_the_descent(monkeypatch):
    """The descent stopped at 300 iterations, checked every 20: on `random_instance(4000, 48, 2, 6.0)` it leaves 41
    tokens to the polish (1000 iterations, checked every 100, leave 27)."""
    monkeypatch.setattr(settings, "DESCENT_ROUNDS", 300)
    monkeypatch.setattr(settings, "DESCENT_CHECK", 20)


@pytest.mark.parametrize("rows", ["orthonormal", "as_they_are"])
def test_the_polish_settles_the_tokens_the_descent_leaves_as_the_definition_does(monkeypatch, rows):
    # a higher rank: the smoothed descent leaves most of the tokens the move left (their optima lie near p_i); from
    # each one's direction one LP over a part of P (interior point; no second LP here) settles all 41, the
    # definition agreeing on each. With A's rows made orthonormal every LP converges; with its rows as they are
    # (columns scaled by u) the method stalled short of its tolerance on some here (rounding near a degenerate
    # optimum, so not asserted) and its last iterate decided (returning nothing there left 3 of 40)
    monkeypatch.setattr(settings, "POLISH_ROUNDS", 1)
    monkeypatch.setattr(settings, "ROW_RANK", settings.ROW_RANK if rows == "orthonormal" else np.inf)
    shorten_the_descent(monkeypatch)
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, witnesses, solver, directions = plain_moves_then_descent(W, p, monkeypatch)
    assert len(directions) == 41 and len(witnesses) == rejected[left].sum() > 0
    P = solver.polytope(p)
    converged, interior_point = [], lp.interior_point
    monkeypatch.setattr(lp, "interior_point", lambda *args: converged.append((x := interior_point(*args))[2]) or x)
    for i in directions:
        if undecided[i]:
            polish.polish(P, i, directions[i], undecided, rejected)
    polished = [i for i in directions if not undecided[i]]
    assert len(polished) == 41 and 0 < rejected[polished].sum() < 41  # both answers among them
    if rows == "orthonormal":
        assert all(converged)
    expected, failures = bat_reject_set(p, W, tokens=left)
    assert not failures and np.array_equal(expected[left], rejected[left])


def test_the_polishs_next_lp_frees_the_tail_tokens_its_dual_wants_elsewhere(monkeypatch):
    # one LP over a part of P (the tail moving as one) settles token i only where the tail's vertex is right; where
    # it is not, the tail tokens carrying the duality gap join the free ones: fewer free tokens at first (2 per row
    # of A and 50 kinks), the same answers as the definition, some tokens after more than one LP
    monkeypatch.setattr(settings, "FREE_COLUMNS", 0)
    monkeypatch.setattr(settings, "POLISH_KINKS", 50)
    shorten_the_descent(monkeypatch)
    W, p = random_instance(4000, 48, 2, scale=6.0)
    left, undecided, rejected, _, solver, directions = plain_moves_then_descent(W, p, monkeypatch)
    P = solver.polytope(p)
    lps, polish_lp = [], polish.polish_lp
    monkeypatch.setattr(polish, "polish_lp", lambda P, i, *args: lps.append(i) or polish_lp(P, i, *args))
    for i in directions:
        if undecided[i]:
            polish.polish(P, i, directions[i], undecided, rejected)
    assert len(lps) > len(set(lps)) and not undecided[left].any()
    expected, failures = bat_reject_set(p, W, tokens=left)
    assert not failures and np.array_equal(expected[left], rejected[left])


@pytest.mark.parametrize("answer", ["none", "outside P", "stalled"])
def test_a_polish_whose_interior_point_fails_or_answers_outside_p_leaves_the_token_to_the_lps(monkeypatch, answer):
    W, p = random_instance(2500, 32, 3, scale=6.0)  # 10 tokens left after the repairs
    without = BATSolver(W).reject_set(p)
    monkeypatch.setattr(settings, "DESCENT_ROWS", 0)
    monkeypatch.setattr(settings, "DESCENT_ROUNDS", 0)  # every token left to the polish
    # "outside P": x = 0 (every free token at 0, q far from P), y = 0 (no certificate); "stalled": x = 0 and a
    # random y, not converged (a bound, valid whatever y is, and no witness)
    calls, rng = [], np.random.default_rng(0)
    answers = {"none": lambda A: None, "outside P": lambda A: (np.zeros(A.shape[1]), np.zeros(A.shape[0]), True),
               "stalled": lambda A: (np.zeros(A.shape[1]), rng.normal(size=A.shape[0]), False)}
    monkeypatch.setattr(lp, "interior_point", lambda A, b, c, tol: calls.append(1) or answers[answer](A))
    failed = BATSolver(W).reject_set(p)
    assert len(calls) == 10 if answer != "stalled" else len(calls) > 10  # a random dual leaves a gap: more LPs
    assert failed.stats["polished"] == 0 and failed.lp_solves > 0
    assert not failed.failed and np.array_equal(failed.rejected, without.rejected)


def test_a_token_the_polish_leaves_gets_few_lp_rounds_where_a_is_dense_then_its_position_fails(monkeypatch):
    monkeypatch.setattr(settings, "FREE_COLUMNS", 4)
    monkeypatch.setattr(settings, "FREE_PER_ROW", 0)
    monkeypatch.setattr(settings, "DESCENT_ROWS", 0)  # A "dense": the descent, the polish, DENSE_PRICING_ROUNDS
    monkeypatch.setattr(settings, "DESCENT_ROUNDS", 0)
    monkeypatch.setattr(settings, "DENSE_PRICING_ROUNDS", 1)
    monkeypatch.setattr(lp, "interior_point", lambda *args: None)
    W, p = random_instance(2500, 16, 5, scale=4.0)
    result = BATSolver(W).reject_set(p)
    assert result.failed and np.isnan(result.tbat(p)) and "undecided after 1 pricing rounds" in result.stats["status"]


def test_interior_point_finds_a_bounded_lps_optimum_and_its_duals():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(30, 120))
    b, c = A @ rng.uniform(0.1, 0.9, 120), rng.normal(size=120)
    x, y, converged = lp.interior_point(A, b, c, 1e-10)
    assert converged
    expected = scipy.optimize.linprog(c, A_eq=A, b_eq=b, bounds=(0, 1))
    assert abs(c @ x - expected.fun) < 1e-8 and np.abs(A @ x - b).max() < 1e-8 and x.min() >= 0 and x.max() <= 1
    reduced = c - A.T @ y  # optimal duals: reduced costs >= 0 where x is at 0, <= 0 where at 1
    assert (reduced[x < 1e-6] > -1e-6).all() and (reduced[x > 1 - 1e-6] < 1e-6).all()


def test_interior_point_never_claims_to_solve_an_infeasible_lp():
    stopped = lp.interior_point(np.ones((1, 2)), np.array([3.0]), np.zeros(2), 1e-10)  # x1 + x2 <= 2
    assert stopped is not None and not stopped[2]  # its last iterate, not converged
    # here its iterates stop being finite: no answer at all
    assert lp.interior_point(np.array([[1.0, 1], [1, -1]]), np.array([3.0, 0.1]), np.zeros(2), 1e-10) is None


def test_a_descent_witness_that_fails_its_check_rejects_nothing(monkeypatch):
    monkeypatch.setattr(Polytope, "witnesses", lambda self, q, *args: np.zeros(len(q), dtype=bool))  # every q refused
    W, p = random_instance(2500, 16, 5, scale=4.0)
    left, undecided, rejected, witnesses, *_ = plain_moves_then_descent(W, p, monkeypatch)
    assert not rejected[left].any() and undecided[left].sum() == 19 and not witnesses


def test_the_descent_in_reject_set_gives_the_same_set_with_fewer_lps(monkeypatch):
    # it runs where A has more rows than DESCENT_ROWS (k = 576, not 64: there it would cost what it saves)
    W, p = random_instance(2500, 32, 3, scale=6.0)  # 10 tokens left after the repairs, all accepted
    without = BATSolver(W).reject_set(p)
    monkeypatch.setattr(settings, "DESCENT_ROWS", 0)
    descended = BATSolver(W).reject_set(p)
    assert "descended" in descended.stats and "descended" not in without.stats
    assert np.array_equal(descended.rejected, without.rejected) and descended.lp_solves < without.lp_solves


def test_a_large_vocabularys_lp_frees_more_tokens_than_a_has_rows(monkeypatch):
    # with no more free columns than rows the free tokens alone cannot move q: only tail vertices would
    monkeypatch.setattr(settings, "FREE_COLUMNS", 4)
    W, p = random_instance(2500, 40, 5, scale=4.0)
    solver = BATSolver(W)
    undecided = np.zeros(len(p), dtype=bool)
    undecided[:3] = True
    position_lp = solver.position_lp(solver.polytope(p), undecided)
    assert len(position_lp.free) >= settings.FREE_PER_ROW * solver.Q.shape[0] == 82
    assert undecided[position_lp.free].sum() == 3


def test_column_generation_over_the_tail_gives_the_definitions_set(monkeypatch):
    # 2,500 tokens, more than one LP over every token (FULL_LP_COLUMNS): each position's LP frees its undecided
    # tokens and (here) the 4 most probable; tail vertices priced in until a witness or a certificate
    monkeypatch.setattr(settings, "FREE_COLUMNS", 4)
    monkeypatch.setattr(settings, "FREE_PER_ROW", 0)
    W, p = random_instance(2500, 16, 5, scale=4.0)
    result = BATSolver(W).reject_set(p)
    assert not result.failed and result.stats["tail_vertices"] > 5
    accepted = np.flatnonzero(~result.rejected)
    rejected = np.random.default_rng(1).choice(np.flatnonzero(result.rejected & (p / 0.8 > 1e-9)), 40, replace=False)
    chosen = np.concatenate([accepted, rejected])
    expected, failures = bat_reject_set(p, W, tokens=chosen)
    assert not failures and len(accepted) == 5
    assert np.array_equal(expected[chosen], result.rejected[chosen])


def test_a_position_that_column_generation_cannot_settle_is_marked_failed_not_decided(monkeypatch):
    monkeypatch.setattr(settings, "FREE_COLUMNS", 4)
    monkeypatch.setattr(settings, "FREE_PER_ROW", 0)
    monkeypatch.setattr(settings, "MAX_PRICING_ROUNDS", 1)
    W, p = random_instance(2500, 16, 5, scale=4.0)
    result = BATSolver(W).reject_set(p)
    assert result.failed and np.isnan(result.tbat(p))
    assert "undecided after 1 pricing rounds" in result.stats["status"]


def test_bytes_above_the_threshold_are_never_rejected_so_skipping_them_is_exact():
    W, p = random_instance(32, 3, 5, scale=8.0)
    assert p.max() > 0.2
    with_skip, _ = bat_reject_set(p, W, skip_above_threshold=True)
    without, failures = bat_reject_set(p, W, skip_above_threshold=False)
    assert not failures and np.array_equal(with_skip, without)


def test_full_rank_needs_no_linear_program():
    W, p = random_instance(64, 64, 3)
    solver = BATSolver(W)
    assert solver.full_rank and solver.highs is None
    result = solver.reject_set(p)
    assert result.lp_solves == 0 and not result.rejected.any() and result.tbat(p) == 0.0


def test_full_rank_rejects_no_byte_with_mass_however_small():
    """At full rank q = p is the only feasible point: a byte with p_i = 1e-12 (below the solver's zero_tol) cannot be
    zeroed, so it is not rejected and TBAT is exactly 0 (it was reported as 9.6e-11 in Table 4.1)."""
    W, p = random_instance(64, 64, 5)
    p[:10] = [1e-12, 1e-10, 5e-10, 0, 0, 0, 0, 0, 0, 0]
    p /= p.sum()
    result = BATSolver(W).reject_set(p)
    assert np.array_equal(result.rejected, p == 0) and result.tbat(p) == 0.0


def test_decoded_distributions_with_zeros_reject_exactly_the_empty_bytes_at_full_rank():
    W, p = random_instance(64, 64, 4)
    p[p < np.sort(p)[-5]] = 0.0  # top-5
    p /= p.sum()
    assert np.array_equal(BATSolver(W).reject_set(p).rejected, p == 0)


def test_dual_bounds_are_valid_lower_bounds():
    W, p = random_instance(32, 4, 6)
    u = p / 0.8
    Q = row_basis(W, 1e-10)
    S = np.random.default_rng(0).normal(size=(50, Q.shape[0])) @ Q
    bounds = dual_bounds(S, p, u)
    expected, _ = bat_reject_set(p, W, skip_above_threshold=False)
    assert not (bounds[expected] > 1e-9).any()  # a rejected byte can never get a positive certificate


def test_positions_over_worker_processes_match_one_process():
    W, _ = random_instance(64, 8, 7)
    probs = np.stack([np.exp(W @ np.random.default_rng(i).normal(size=8)) for i in range(6)])
    probs /= probs.sum(1, keepdims=True)
    one = tbat_positions(W, probs, TBATSettings(), workers=1)
    two = tbat_positions(W, probs, TBATSettings(), workers=2)
    assert [r.index for r in two] == list(range(6))
    assert [r.tbat for r in one] == [r.tbat for r in two]


def test_position_sample_is_seeded_and_sorted():
    a = sample_positions(1000, 50, seed=3)
    assert np.array_equal(a, sample_positions(1000, 50, seed=3)) and np.all(np.diff(a) > 0)
    assert np.array_equal(sample_positions(10, "all", seed=3), np.arange(10))
    assert len(sample_positions(10, 50, seed=3)) == 10


def test_a_witness_outside_the_polytope_is_solved_again_from_scratch_and_a_second_fails_the_position(monkeypatch):
    W, p = random_instance(256, 16, 11, scale=6.0)
    expected = BATSolver(W).reject_set(p)
    check, calls = lp.PositionLP._witness, []

    def once_outside(self, values):  # the first LP answer is taken for a warm start's rounding error
        calls.append(1)
        return None if len(calls) == 1 else check(self, values)

    monkeypatch.setattr(lp.PositionLP, "_witness", once_outside)
    again = BATSolver(W).reject_set(p)
    assert not again.failed and np.array_equal(again.rejected, expected.rejected)
    assert again.lp_solves == expected.lp_solves + 1
    monkeypatch.setattr(lp.PositionLP, "_witness", lambda self, values: None)
    failed = BATSolver(W).reject_set(p)
    assert failed.failed and np.isnan(failed.tbat(p)) and failed.stats["status"] == "witness outside the polytope"


def blas_threads() -> set[int]:
    return {info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"}


def test_a_tbat_worker_runs_blas_on_one_thread():
    # Snakemake sets OPENBLAS_NUM_THREADS to a job's threads, and a TBAT job's threads are its worker processes:
    # each worker (the pool's initializer) brings its own BLAS down to one thread, the job's own process keeps its
    with threadpoolctl.threadpool_limits(2):
        assert blas_threads() == {2}
        with tbat.worker_pool(2) as pool:
            assert pool.submit(blas_threads).result() == {1}
        assert blas_threads() == {2}
        one_blas_thread()
        assert blas_threads() == {1}
