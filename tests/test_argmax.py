"""Unargmaxable classes: the exact test on heads built with a known answer, the pre-screen, witnesses."""

import math

import numpy as np
import pytest
import torch
from scipy.spatial import ConvexHull

from oversmooth.analysis.argmax import (
    centred_basis,
    exact_argmaxable,
    head_geometry,
    linear_head_vertices,
    reflection_search,
    unargmaxable_classes,
    verify_witness,
)
from oversmooth.models.model import BottleneckHead


def head_with_rows(rows: np.ndarray, beta: np.ndarray | None = None) -> BottleneckHead:
    """A k = d + 1 head whose logits are rows @ t (+ W beta) for inputs t of the centred subspace."""
    V, d = rows.shape
    head = BottleneckHead(8, d + 1, V).double()
    U = centred_basis(d + 1)
    with torch.no_grad():
        head.out.weight.copy_(torch.from_numpy(rows @ U.T))
        head.norm.weight.fill_(1.0)
        head.norm.bias.copy_(torch.from_numpy(beta if beta is not None else np.zeros(d + 1)))
    return head


def circle(n, radius=1.0, offset=0.0):
    angles = offset + 2 * np.pi * np.arange(n) / n
    return radius * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def test_centred_basis_is_orthonormal_and_centred():
    U = centred_basis(5)
    assert U.shape == (5, 4)
    np.testing.assert_allclose(U.T @ U, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(U.sum(0), 0, atol=1e-12)


def test_a_class_strictly_inside_the_convex_hull_is_unargmaxable():
    rows = np.vstack([circle(12), [[0.3, 0.1]]])  # the last class lies inside the others' hull, no bias
    head = head_with_rows(rows)
    report = unargmaxable_classes(head)
    assert report.unargmaxable == [12] and report.flagged_approx == [12]
    assert sorted(report.witnesses) == [] and not report.failed  # nothing flagged falsely here


def test_false_flags_of_the_pre_screen_are_cleared_with_verified_witnesses():
    rows = np.vstack([circle(12), [[0.3, 0.1]]])
    head = head_with_rows(rows)
    report = unargmaxable_classes(head, patience=-1)  # no search at all: the pre-screen flags every class
    assert len(report.flagged_approx) == 13
    assert report.unargmaxable == [12]
    assert sorted(report.witnesses) == list(range(12))
    geometry = head_geometry(head)
    for i, t in report.witnesses.items():
        assert np.linalg.norm(t) < geometry.radius and verify_witness(head, geometry, t, i)


def test_a_thin_wedge_class_is_argmaxable_and_its_witness_runs_through_the_head():
    rows = circle(36)
    wedge = 1.0001 * np.array([math.cos(math.radians(5)), math.sin(math.radians(5))])
    rows = np.vstack([rows, wedge])  # just outside the chord between its neighbours
    head = head_with_rows(rows)
    geometry = head_geometry(head)
    verdict, t = exact_argmaxable(geometry, 36)
    assert verdict == "argmaxable" and verify_witness(head, geometry, t, 36)


def test_a_class_reachable_only_beyond_layernorm_norm_is_reported_apart():
    # class 1 beats class 0 only where t_1 + t_2 > 3.2: inside the box |t| <= sqrt(3) but outside the ball
    rows = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])
    geometry = head_geometry(head_with_rows(rows))
    geometry = type(geometry)(geometry.A, np.array([3.2, 0.0, 0.0, 0.0]), geometry.U, geometry.radius)
    assert exact_argmaxable(geometry, 1)[0] == "beyond_norm"
    assert exact_argmaxable(geometry, 0)[0] == "argmaxable"
    far = type(geometry)(geometry.A, np.array([5.0, 0.0, 0.0, 0.0]), geometry.U, geometry.radius)
    assert exact_argmaxable(far, 1)[0] == "unargmaxable"  # not even in the box


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_verdicts_agree_with_a_dense_search_in_two_dimensions(seed):
    rng = np.random.default_rng(seed)
    rows = rng.normal(size=(30, 2))
    head = head_with_rows(rows, beta=rng.normal(size=3) * 0.3)
    geometry = head_geometry(head)
    angles = np.linspace(0, 2 * np.pi, 4000, endpoint=False)
    radii = geometry.radius * np.linspace(0.001, 0.999, 200)
    T = (radii[:, None, None] * np.stack([np.cos(angles), np.sin(angles)], axis=1)[None]).reshape(-1, 2)
    seen = set(np.argmax(T @ geometry.A.T + geometry.c, axis=1).tolist())
    report = unargmaxable_classes(head)
    assert not seen & set(report.unargmaxable)  # nothing the search reached is called unargmaxable
    for i in set(range(30)) - seen:  # what the grid missed is either unargmaxable or has a witness
        assert i in report.unargmaxable or reflection_search(geometry, i, 200, rng) is not None or i in report.witnesses


def test_trained_shape_head_runs():
    torch.manual_seed(0)
    head = BottleneckHead(32, 4, 256).double()
    report = unargmaxable_classes(head, patience=50)
    assert set(report.unargmaxable) <= set(report.flagged_approx)
    assert not report.failed


def _stretched_sphere(n: int = 400, d: int = 5) -> np.ndarray:
    """Points in convex position (every row a vertex) whose least-squares directions miss over 40 of them."""
    rng = np.random.default_rng(0)
    points = rng.standard_normal((n, d))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    points[:, 0] *= 10.0
    return points + 0.3 * np.sign(points[:, 1:2]) * np.eye(d)[1]


def test_refined_directions_find_the_vertices_the_least_squares_directions_miss_without_an_lp(monkeypatch):
    import oversmooth.analysis.argmax as argmax

    points = _stretched_sphere()
    assert len(ConvexHull(points).vertices) == len(points)
    least_squares = np.linalg.pinv(points.T @ points)
    assert (argmax.strict_argmax_rows(points, points @ least_squares, 1e-9)[0] != np.arange(len(points))).sum() > 40

    def no_lp(*args, **kwargs):
        raise AssertionError("an LP was needed")

    monkeypatch.setattr(argmax, "_VertexLP", no_lp)
    report = linear_head_vertices(points, n_random=0)
    assert sorted(report.witnesses) == list(range(len(points))) and not report.unargmaxable
    for i, z in report.witnesses.items():
        scores = points @ z
        assert int(np.argmax(scores)) == i and np.sort(scores)[-2] < scores[i]


@pytest.mark.parametrize("seed", range(12))
def test_a_row_s_own_lp_never_holds_the_row_itself_even_with_fewer_rows_than_neighbours(monkeypatch, seed):
    """The review's case: with V <= `neighbours`, a row's own model held the row, whose constraint capped its margin
    at 0, so a vertex the least-squares directions missed was certified unargmaxable."""
    import oversmooth.analysis.argmax as argmax

    monkeypatch.setattr(argmax, "REFINE_ROUNDS", 0)  # the LPs decide what the least-squares directions miss
    points = _stretched_sphere(40) if seed == 0 else np.random.default_rng(seed).standard_normal((20 + 4 * seed, 3))
    report = linear_head_vertices(points, n_random=0)
    assert sorted(report.witnesses) == sorted(ConvexHull(points).vertices.tolist()) and not report.failed


def test_near_full_rank_each_undecided_row_gets_its_own_lp_from_its_neighbours_and_the_rows_that_beat_it():
    """Most rows vertices (points on a sphere), a few inside: each undecided row is decided by an LP of its own that
    starts from 2 rows and grows by the rows that beat it, and the verdicts are the convex hull's."""
    rng = np.random.default_rng(3)
    sphere = rng.standard_normal((150, 5))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    inside = 0.9 * sphere[:12] + 0.05 * rng.standard_normal((12, 5))
    points = np.vstack([sphere, inside, 0.999 * sphere[20:23]])  # 3 rows just inside the sphere's vertices
    report = linear_head_vertices(points, n_random=0, neighbours=2)
    hull = sorted(ConvexHull(points).vertices.tolist())
    assert sorted(report.witnesses) == hull and not report.failed
    assert len(report.margins) == len(points) - len(hull) and max(report.margins.values()) <= 1e-9 * 10
    for i, z in report.witnesses.items():
        scores = points @ z
        assert int(np.argmax(scores)) == i and np.sort(scores)[-2] < scores[i]


def test_linear_head_vertices_are_the_convex_hull_s_vertices_with_witnesses_and_duplicates_never_win():
    square = np.array([[1.0, 1], [1, -1], [-1, 1], [-1, -1], [0.2, 0.1], [1, 0], [0.5, 0.5], [0.5, 0.5]])
    report = linear_head_vertices(square, n_random=0)
    assert sorted(report.witnesses) == [0, 1, 2, 3]  # the corners; [1, 0] lies on an edge: never the strict argmax
    assert report.unargmaxable == [4, 5, 6, 7] and report.duplicates == [6, 7] and not report.failed
    for i, z in report.witnesses.items():
        assert int(np.argmax(square @ z)) == i and np.sort(square @ z)[-2] < (square @ z)[i]
    points = np.random.default_rng(0).standard_normal((400, 3))
    report = linear_head_vertices(points, n_random=16, seed=1)  # few random directions: the LPs find the rest
    assert sorted(report.witnesses) == sorted(ConvexHull(points).vertices.tolist())
    assert len(report.witnesses) + len(report.unargmaxable) == 400 and max(report.margins.values()) <= 1e-9 * 10
