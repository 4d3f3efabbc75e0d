"""Oversmoothing tables pivot the per-pair summaries into the thesis's layouts; byte names as in appendix A."""

import numpy as np
import pandas as pd
import pytest

from oversmooth.analysis.metrics import METRICS
from oversmooth.data.bytenames import byte_name
from oversmooth.reporting.argmax_report import token_bottleneck_points
from oversmooth.reporting.metrics_report import (
    table_4_1,
    table_4_2,
    table_6_1,
    table_e,
    table_e_tbat,
    table_f_1,
)
from oversmooth.reporting.figures import figure_token_bottleneck
from oversmooth.workflow.outputs import e_table_names, tbat_table_names, truncation_table_names

MODELS = ["bn-4", "bn-16"]
GTS = ["gt-a", "gt-b"]
METHODS = ["pure", "greedy", "top_k", "top_p", "temperature"]


@pytest.fixture
def summary():
    """mean = k + 0.1 * gt index + 0.01 * method index + 0.001 * metric index: every cell is identifiable."""
    rows = []
    for model in MODELS:
        for g, gt in enumerate(GTS):
            for m, method in enumerate(METHODS):
                for i, metric in enumerate(METRICS):
                    mean = int(model[3:]) + 0.1 * g + 0.01 * m + 0.001 * i
                    infinite = 7 if metric == "kl" and method == "greedy" else 0
                    rows.append(
                        {"model": model, "ground_truth": gt, "method": method, "metric": metric, "mean": mean, "sd": 0.5,
                         "ci_low": mean - 0.1, "ci_high": mean + 0.1, "n_positions": 100 - infinite, "n_prompts": 4,
                         "n_infinite": infinite}
                    )
    return pd.DataFrame(rows)


def tbat_summary():
    rows = [
        {"model": m, "method": method, "metric": "tbat", "mean": 0.5 / int(m[3:]) + 0.01 * i, "sd": 0.1, "ci_low": 0.0,
         "ci_high": 1.0, "n_positions": 50, "n_prompts": 4, "n_failed": 1 if method == "top_p" else 0}
        for m in MODELS for i, method in enumerate(METHODS)
    ]
    return pd.DataFrame(rows)


def test_table_4_1_has_tto_and_nsmd_per_ground_truth_and_tbat(summary):
    table = table_4_1(summary, MODELS, tbat_summary())
    assert table["bottleneck"].tolist() == [4, 16]
    assert table["TTO mean (gt-a)"].tolist() == pytest.approx([4.0, 16.0])
    assert table["NSMD mean (gt-b)"].tolist() == pytest.approx([4.101, 16.101])
    assert table["TTO ci_high (gt-b)"].tolist() == pytest.approx([4.2, 16.2])
    assert table["TBAT mean"].tolist() == pytest.approx([0.125, 0.03125])  # pure sampling
    assert table["TBAT n_positions"].tolist() == [50, 50]


def test_tbat_tables_e_7_and_e_8():
    assert tbat_table_names(METHODS) == {"table_e_7": ["pure", "greedy", "temperature"], "table_e_8": ["top_k", "top_p"]}
    table = table_e_tbat(tbat_summary(), MODELS, ["top_k", "top_p"])
    assert table["Top-P n_failed"].tolist() == [1, 1]
    assert table["Top-K mean"].tolist() == pytest.approx([0.125 + 0.02, 0.03125 + 0.02])


def test_table_4_2_carries_kl_infinite_counts(summary):
    table = table_4_2(summary, MODELS)
    assert table["KL mean (gt-a)"].tolist() == pytest.approx([4.003, 16.003])
    assert table["KL n_infinite (gt-a)"].tolist() == [0, 0]  # pure sampling
    assert "KL_eps mean (gt-b)" in table.columns


def test_table_6_1_averages_the_ground_truths(summary):
    table = table_6_1(summary, MODELS, METHODS)
    row = table[(table["model"] == "bn-16") & (table["metric"] == "TV")].iloc[0]
    assert row["Greedy mean"] == pytest.approx(16 + 0.05 + 0.01 + 0.002)
    assert list(table.columns) == ["bottleneck", "model", "metric", "Pure mean", "Greedy mean", "Top-K mean", "Top-P mean", "Temp. mean"]


def test_appendix_e_tables_per_ground_truth_and_method_group(summary):
    names = e_table_names(GTS, METHODS)
    assert names == {
        "table_e_1": ("gt-a", ["pure", "greedy", "temperature"]), "table_e_2": ("gt-a", ["top_k", "top_p"]),
        "table_e_3": ("gt-b", ["pure", "greedy", "temperature"]), "table_e_4": ("gt-b", ["top_k", "top_p"]),
    }
    assert e_table_names(["gt-a"], ["pure", "top_p"]) == {"table_e_1": ("gt-a", ["pure"]), "table_e_2": ("gt-a", ["top_p"])}
    four = e_table_names(["g1", "g2", "g3", "g4"], METHODS)
    assert four["table_e_9"] == ("g4", ["pure", "greedy", "temperature"]) and "table_e_7" not in four
    table = table_e(summary, MODELS, "gt-b", ["pure", "greedy", "temperature"])
    kl = table[(table["model"] == "bn-4") & (table["metric"] == "KL")].iloc[0]
    assert kl["Greedy n_infinite"] == 7 and kl["Pure n_infinite"] == 0
    assert kl["Temp. mean"] == pytest.approx(4 + 0.1 + 0.04 + 0.003)


def test_table_f_1_averages_the_means(summary):
    table = table_f_1(summary, MODELS)
    assert table["average mean"].tolist() == pytest.approx([4.055, 16.055])


def test_byte_names_follow_appendix_a():
    assert [byte_name(b) for b in (0, 9, 10, 31, 32, 65, 126, 127, 128, 255)] == [
        "NUL", "HT", "LF", "US", "SP", "A", "~", "DEL", "x80", "xFF"
    ]
    assert len({byte_name(b) for b in range(256)}) == 256
    with pytest.raises(ValueError):
        byte_name(256)


def test_the_token_bottleneck_figure_puts_the_full_head_last_at_its_hidden_size_and_skips_heads_without_tbat():
    def tbat(label, cells):
        return pd.DataFrame([{"model": m, f"{label} mean": c, f"{label} ci_low": c - 0.1, f"{label} ci_high": c + 0.1}
                             for m, c in cells.items()])

    pure = tbat("Pure", {"tok-svd-r4": 0.9, "tok-learned-r4": 0.8, "tok-svd-r64": 0.5, "tok-learned-r64": np.nan,
                         "tok-full": 0.3})
    top_p = tbat("Top-P", {"tok-svd-r4": 0.7, "tok-learned-r4": 0.6, "tok-svd-r64": 0.2, "tok-learned-r64": np.nan,
                           "tok-full": 0.1})
    table_b = pd.DataFrame([{"model": m, "kind": kind, "k": k, "vocabulary": 100, "n_unargmaxable": n}
                            for m, kind, k, n in (("tok-svd-r4", "svd", 4, 97), ("tok-full", "full", 576, 0))])
    points = token_bottleneck_points(pure, top_p, table_b)
    tbat_points = points[points["panel"] == "tbat"]
    assert len(tbat_points) == 8  # tok-learned-r64's TBAT was not computed: no point for it
    assert set(tbat_points.loc[tbat_points["kind"] == "full", "k"]) == {576}
    share = points[points["panel"] == "unargmaxable"].set_index("kind")["mean"]
    assert share.to_dict() == {"svd": 0.97, "full": 0.0}
    fig = figure_token_bottleneck(points)
    tbat_axis, share_axis = fig.axes
    stars = [line for line in tbat_axis.lines if line.get_marker() == "*"]
    assert [list(s.get_xdata()) for s in stars] == [[128], [128]]  # pure, top-p: one step beyond the widest head
    assert [t.get_text() for t in tbat_axis.get_xticklabels()] == ["4", "64", "full\n(576)"]  # named by its size
    without_b = token_bottleneck_points(pure, None, None)
    assert set(without_b["line"]) == {"pure"} and without_b.loc[without_b["kind"] == "full", "k"].isna().all()
    axis = figure_token_bottleneck(without_b).axes[0]
    assert [t.get_text() for t in axis.get_xticklabels()] == ["4", "64", "full"]  # no hidden size made up
    heads_only = token_bottleneck_points(pure[pure["model"] != "tok-full"], None, None)
    assert [t.get_text() for t in figure_token_bottleneck(heads_only).axes[0].get_xticklabels()] == ["4", "64"]


def with_truncation_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """`summary` with epsilon for every model (the others' 100 positions) and BA-epsilon for bn-4 only, at 24 positions
    (BA's own sample; bn-16 here stands for a model without one head matrix): mean = k + 0.1 g + 0.5 (epsilon) or
    0.7 (BA-epsilon) + 0.001 i."""
    rows = []
    for model in MODELS:
        for g, gt in enumerate(GTS):
            for method, offset, n in (("epsilon", 0.5, 100), ("ba_epsilon", 0.7, 24)):
                if method == "ba_epsilon" and model != "bn-4":
                    continue
                for i, metric in enumerate(METRICS):
                    mean = int(model[3:]) + 0.1 * g + offset + 0.001 * i
                    rows.append({"model": model, "ground_truth": gt, "method": method, "metric": metric, "mean": mean,
                                 "sd": 0.5, "ci_low": mean - 0.1, "ci_high": mean + 0.1, "n_positions": n,
                                 "n_prompts": 4, "n_infinite": 0})
    return pd.concat([summary, pd.DataFrame(rows)], ignore_index=True)


def test_table_6_1_shows_ba_where_a_model_has_it_and_the_positions_where_they_differ(summary):
    wide = with_truncation_rows(summary)
    table = table_6_1(wide, MODELS, [*METHODS, "epsilon", "ba_epsilon", "ba_eta"])  # ba_eta: no model measured it
    assert list(table.columns) == ["bottleneck", "model", "metric", "Pure mean", "Greedy mean", "Top-K mean",
                                   "Top-P mean", "Temp. mean", "Epsilon mean", "BA-Epsilon mean", "positions",
                                   "BA-Epsilon positions"]
    tv = table[table["metric"] == "TV"].set_index("model")
    assert tv.loc["bn-4", "BA-Epsilon mean"] == pytest.approx(4 + 0.05 + 0.7 + 0.002)  # the ground truths' average
    assert np.isnan(tv.loc["bn-16", "BA-Epsilon mean"]) and np.isnan(tv.loc["bn-16", "BA-Epsilon positions"])
    assert tv.loc["bn-16", "Epsilon mean"] == pytest.approx(16 + 0.05 + 0.5 + 0.002)
    assert tv["positions"].tolist() == [100, 100]  # pure's positions, KL's infinite ones counted
    assert tv.loc["bn-4", "BA-Epsilon positions"] == 24
    same = table_6_1(with_truncation_rows(summary), MODELS, [*METHODS, "epsilon"])
    assert "positions" not in same.columns  # every method at the same positions: no count shown


def test_the_truncation_tables_are_appendix_e_for_the_third_group(summary):
    wide = with_truncation_rows(summary)
    names = truncation_table_names(["gt-a", "gt-b"], [*METHODS, "epsilon", "typical", "ba_epsilon"])
    assert names == {"table_truncation_a": ("gt-a", ["epsilon", "typical", "ba_epsilon"]),
                     "table_truncation_b": ("gt-b", ["epsilon", "typical", "ba_epsilon"])}
    assert truncation_table_names(["gt-a"], METHODS) == {}  # the thesis's five only: no third group
    with pytest.raises(ValueError, match="ground_truths: gt-tbat's table_truncation_tbat would be"):
        truncation_table_names(["gt-tbat"], ["epsilon"])
    table = table_e(wide, MODELS, "gt-b", ["epsilon", "typical", "ba_epsilon"])  # typical: not measured, no columns
    kl = table[table["metric"] == "KL"].set_index("model")
    assert kl.loc["bn-4", "BA-Epsilon mean"] == pytest.approx(4 + 0.1 + 0.7 + 0.003)
    assert kl.loc["bn-4", "BA-Epsilon ci_high"] == pytest.approx(4 + 0.1 + 0.7 + 0.003 + 0.1)
    assert kl.loc["bn-4", "Epsilon n_infinite"] == 0 and np.isnan(kl.loc["bn-16", "BA-Epsilon n_infinite"])
    assert not any(c.startswith("Typical") for c in table.columns)
    assert (kl["positions"].tolist(), kl.loc["bn-4", "BA-Epsilon positions"]) == ([100, 100], 24)
    assert tbat_table_names([*METHODS, "min_p", "ba_eta"])["table_truncation_tbat"] == ["min_p", "ba_eta"]
    assert "table_truncation_tbat" not in tbat_table_names(METHODS)


def test_the_truncation_tbat_table_counts_ba_at_its_own_positions():
    rows = [{"model": "bn-4", "method": "eta", "metric": "tbat", "mean": 0.2, "sd": 0.1, "ci_low": 0.1, "ci_high": 0.3,
             "n_positions": 48, "n_prompts": 4, "n_failed": 2},
            {"model": "bn-4", "method": "ba_eta", "metric": "tbat", "mean": 0.1, "sd": 0.1, "ci_low": 0.0,
             "ci_high": 0.2, "n_positions": 20, "n_prompts": 4, "n_failed": 0},
            {"model": "bn-16", "method": "eta", "metric": "tbat", "mean": 0.05, "sd": 0.1, "ci_low": 0.0,
             "ci_high": 0.1, "n_positions": 50, "n_prompts": 4, "n_failed": 0}]
    table = table_e_tbat(pd.DataFrame(rows), MODELS, ["eta", "ba_eta"]).set_index("model")
    assert table.loc["bn-4", "Eta n_failed"] == 2 and table.loc["bn-4", "BA-Eta mean"] == 0.1
    assert table["positions"].tolist() == [50, 50]  # 48 measured and 2 failed; 50
    assert table.loc["bn-4", "BA-Eta positions"] == 20 and np.isnan(table.loc["bn-16", "BA-Eta mean"])
