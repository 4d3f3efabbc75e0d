"""Oversmoothing along training: the points of each run, interpolation at matched loss, the table and the figure,
on hand-made frames."""

import math

import numpy as np
import pandas as pd
import pytest

from oversmooth.reporting.along_training import (
    at_loss,
    loss_levels,
    loss_matched_table,
    training_points,
    trajectory,
)
from oversmooth.reporting.figures import figure_loss_matched

LOGS = {
    "bn-4": pd.DataFrame({"iteration": [0, 10, 20], "val_loss": [5.5, 3.0, 2.4], "head_singular_entropy_gap": [0.0, 0.2, 0.3]}),
    "bn-8": pd.DataFrame({"iteration": [0, 10, 20], "val_loss": [5.5, 2.8, 2.2], "head_singular_entropy_gap": [0.0, 0.4, 0.5]}),
    "bn-16": pd.DataFrame({"iteration": [0, 10, 20], "val_loss": [5.5, 2.3, 2.0], "head_singular_entropy_gap": [0.0, 0.6, 0.7]}),
}
POINTS = ["bn-4@10", "bn-8@10", "bn-16@10", "bn-4", "bn-8", "bn-16"]
# TTO of each point: falls with k and along training
TTO = {"bn-4@10": 0.9, "bn-4": 0.8, "bn-8@10": 0.7, "bn-8": 0.5, "bn-16@10": 0.3, "bn-16": 0.2}


def _points():
    return training_points(LOGS, {"bn-4": 20, "bn-8": 20, "bn-16": 20}, POINTS)


def _trajectory():
    summary = pd.DataFrame({"model": list(TTO), "ground_truth": "gt-x", "method": "pure", "metric": "tto",
                            "mean": list(TTO.values()), "ci_low": 0.0, "ci_high": 1.0})
    tbat = pd.DataFrame({"model": list(TTO), "method": "pure", "metric": "tbat", "mean": 0.1, "ci_low": 0.0, "ci_high": 0.2})
    return trajectory(_points(), summary, tbat)


def test_each_point_takes_its_iteration_s_loss_and_probe_from_its_run_s_log():
    points = _points().set_index("point")
    assert points.loc["bn-8@10", ["bottleneck", "iteration", "val_loss", "singular_entropy_gap"]].tolist() == [8, 10, 2.8, 0.4]
    assert points.loc["bn-8", "iteration"] == 20 and points.loc["bn-8", "final"] and not points.loc["bn-8@10", "final"]
    with pytest.raises(KeyError, match="bn-4@15: the training log of bn-4 has no evaluation at iteration 15"):
        training_points(LOGS, {"bn-4": 20}, ["bn-4@15"])


def test_a_metric_at_a_loss_is_linear_between_the_bracketing_points_and_nan_outside():
    run = pd.DataFrame({"val_loss": [2.0, 3.0, 2.5], "mean": [0.5, 0.9, 0.6]})
    got = at_loss(run, np.array([2.75, 2.25, 1.9, 3.1, 3.0]))
    assert got[:2] == pytest.approx([0.75, 0.55]) and np.isnan(got[2:4]).all() and got[4] == pytest.approx(0.9)


def test_levels_span_the_losses_two_or_more_runs_pass_through():
    # spans: bn-4 [2.4, 3.0], bn-8 [2.2, 2.8], bn-16 [2.0, 2.3]: two or more between 2.2 and 2.8
    assert loss_levels(_trajectory(), 4) == pytest.approx([2.2, 2.4, 2.6, 2.8])
    assert loss_levels(_trajectory(), 1) == pytest.approx([2.5])
    apart = pd.DataFrame({"bottleneck": [4, 4, 8, 8], "val_loss": [3.0, 2.9, 2.0, 2.1]})
    assert loss_levels(apart, 3).size == 0


def test_the_table_compares_the_family_at_each_matched_loss():
    table = loss_matched_table(_trajectory(), 4)
    tto = table[table["metric"] == "TTO"].reset_index(drop=True)
    assert list(tto.columns) == ["ground_truth", "method", "metric", "val_loss", "bn-4", "bn-8", "bn-16",
                                 "n_bottlenecks", "spearman_k", "bn-4 ci_low", "bn-4 ci_high", "bn-8 ci_low",
                                 "bn-8 ci_high", "bn-16 ci_low", "bn-16 ci_high"]
    assert tto["val_loss"].tolist() == pytest.approx([2.2, 2.4, 2.6, 2.8])
    # at loss 2.8: bn-4 between 3.0 (0.9) and 2.4 (0.8) -> 0.8 + 0.4/0.6 * 0.1; bn-8 at its checkpoint 0.7
    last = tto.iloc[3]
    assert last["bn-4"] == pytest.approx(0.8 + 0.1 * 0.4 / 0.6) and last["bn-8"] == pytest.approx(0.7)
    assert math.isnan(last["bn-16"]) and last["n_bottlenecks"] == 2 and math.isnan(last["spearman_k"])
    assert last[["bn-4 ci_low", "bn-4 ci_high"]].tolist() == [0.0, 1.0] and math.isnan(last["bn-16 ci_low"])
    # at 2.2 bn-8 (0.5) and bn-16 (between 2.3: 0.3 and 2.0: 0.2 -> 0.2 + 0.2/0.3 * 0.1) only
    first = tto.iloc[0]
    assert first["bn-16"] == pytest.approx(0.2 + 0.1 * 0.2 / 0.3) and first["bn-8"] == pytest.approx(0.5)
    tbat = table[table["metric"] == "TBAT"]
    assert (tbat["ground_truth"] == "-").all() and tbat[["bn-4", "bn-8"]].iloc[-1].tolist() == pytest.approx([0.1, 0.1])


def test_a_bottleneck_s_interval_at_a_loss_interpolates_its_points_bounds():
    run = pd.DataFrame({"val_loss": [2.0, 3.0], "mean": [0.5, 0.9], "ci_low": [0.4, 0.6], "ci_high": [0.7, 1.0]})
    levels = np.array([2.5, 2.25])
    assert at_loss(run, levels, "ci_low") == pytest.approx([0.5, 0.45])
    assert at_loss(run, levels, "ci_high") == pytest.approx([0.85, 0.775])


def test_spearman_is_minus_one_when_the_narrower_oversmooths_more_at_equal_loss():
    logs = {f"bn-{k}": pd.DataFrame({"iteration": [10, 20], "val_loss": [3.0, 2.0], "head_singular_entropy_gap": 0.0})
            for k in (4, 8, 16)}
    points = training_points(logs, {m: 20 for m in logs}, [*(f"{m}@10" for m in logs), *logs])
    means = {"bn-4@10": 0.9, "bn-4": 0.8, "bn-8@10": 0.6, "bn-8": 0.5, "bn-16@10": 0.3, "bn-16": 0.1}
    summary = pd.DataFrame({"model": list(means), "ground_truth": "gt-x", "method": "pure", "metric": "nsmd",
                            "mean": list(means.values()), "ci_low": 0.0, "ci_high": 1.0})
    empty = pd.DataFrame(columns=["model", "method", "metric", "mean", "ci_low", "ci_high"])
    table = loss_matched_table(trajectory(points, summary, empty), 3)
    assert table["spearman_k"].tolist() == pytest.approx([-1.0, -1.0, -1.0]) and (table["n_bottlenecks"] == 3).all()


def test_the_figure_has_a_panel_per_metric_and_ground_truth_and_the_probe():
    for extra_ground_truth in (False, True):  # 3 and 4 panels on a shared loss axis
        frame = _trajectory()
        if extra_ground_truth:
            frame = pd.concat([frame, frame[frame["metric"] == "tto"].assign(ground_truth="gt-y")])
        figure = figure_loss_matched(frame)
        titles = sorted(ax.get_title() for ax in figure.axes if ax.get_title())
        assert titles == ["TBAT", "TTO vs gt-x", *(["TTO vs gt-y"] if extra_ground_truth else []),
                          "head singular-entropy gap (Godey)"]
        assert all(ax.xaxis_inverted() for ax in figure.axes if ax.get_title())  # loss falls to the right
