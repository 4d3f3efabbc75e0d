"""Support recovery against a truth with zeros, by hand."""

import numpy as np
import pytest

from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.support import false_support, lost_support, support_recovery, threshold_separable


def logp(*rows):
    with np.errstate(divide="ignore"):
        return np.log(np.array(rows, dtype=np.float64))


TRUTH = logp([0.6, 0.4, 0.0, 0.0], [0.5, 0.0, 0.5, 0.0], [0.25, 0.25, 0.25, 0.25])
MODEL = logp([0.5, 0.3, 0.15, 0.05], [0.4, 0.3, 0.2, 0.1], [0.7, 0.1, 0.1, 0.1])


def test_pure_sampling_keeps_the_model_s_mass_on_the_truth_s_zeros_and_loses_nothing():
    terms = support_recovery(MODEL, TRUTH, Decoding("pure"))
    np.testing.assert_allclose(terms["false_support"], [0.2, 0.4, 0.0])  # 0.15 + 0.05; 0.3 + 0.1; no zero
    np.testing.assert_allclose(terms["lost_support"], [0.0, 0.0, 0.0])


def test_a_truncation_trades_false_support_for_lost_support():
    # top-k 2 renormalised: [0.625, 0.375, 0, 0], [4/7, 3/7, 0, 0], [0.875, 0.125, 0, 0]
    terms = support_recovery(MODEL, TRUTH, Decoding("top_k", top_k=2))
    np.testing.assert_allclose(terms["false_support"], [0.0, 3 / 7, 0.0])
    np.testing.assert_allclose(terms["lost_support"], [0.0, 0.5, 0.5])
    # epsilon 0.12: row 1 keeps 0.5, 0.3, 0.15; row 2 keeps 0.4, 0.3, 0.2; row 3 only the top (the others at 0.1)
    terms = support_recovery(MODEL, TRUTH, Decoding("epsilon", epsilon=0.12))
    np.testing.assert_allclose(terms["false_support"], [0.15 / 0.95, 0.3 / 0.9, 0.0])
    np.testing.assert_allclose(terms["lost_support"], [0.0, 0.0, 0.75])


def test_greedy_loses_all_but_the_top_byte_s_true_mass():
    terms = support_recovery(MODEL, TRUTH, Decoding("greedy"))
    np.testing.assert_allclose(terms["false_support"], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(terms["lost_support"], [0.4, 0.5, 0.75])


def test_a_threshold_separates_the_support_only_where_every_true_byte_outranks_every_false_one():
    # row 1: true {0.5, 0.3} > false {0.15, 0.05}: separable; row 2: true 0.2 < false 0.3: not; row 3: no zero
    np.testing.assert_array_equal(threshold_separable(MODEL, TRUTH), [1.0, 0.0, np.nan])
    tie = logp([0.4, 0.3, 0.3])
    assert threshold_separable(tie, logp([0.5, 0.5, 0.0])) == 0.0  # a tie cannot be cut between its bytes


@pytest.mark.parametrize("method", ["pure", "greedy", "top_k", "top_p", "temperature", "epsilon", "eta", "typical",
                                    "min_p"])
def test_support_terms_are_masses_and_vanish_when_the_model_is_the_truth(method):
    rng = np.random.default_rng(3)
    truth = rng.dirichlet(np.full(256, 0.1), size=40)
    truth[truth < 1e-3] = 0.0  # zeros, as a truncated teacher writes
    truth /= truth.sum(-1, keepdims=True)
    with np.errstate(divide="ignore"):
        log_truth = np.log(truth)
    model = np.log(0.9 * truth + 0.1 * rng.dirichlet(np.ones(256), size=40))
    terms = support_recovery(model, log_truth, Decoding(method))
    for values in terms.values():
        assert ((values >= -1e-12) & (values <= 1 + 1e-12)).all()
    assert false_support(log_truth, log_truth).max() == 0.0 and lost_support(log_truth, log_truth).max() == 0.0


# The support stage's rows, summary, table, matched-lost-support reading and findings, on the same hand cases.
import math  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402

from oversmooth.analysis.support import (  # noqa: E402
    grid_decodings,
    parameter_of,
    summarise_support,
    support_rows,
    write_support,
)
from oversmooth.core.io import read_parquet  # noqa: E402
from oversmooth.reporting.findings import FAILS, HOLDS, support_findings  # noqa: E402
from oversmooth.reporting.support_report import at_lost_support, common_levels, curve, support_table  # noqa: E402
from oversmooth.workflow.config import load_config  # noqa: E402
from oversmooth.workflow.outputs import planned_outputs, support_models, support_truth  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def test_the_grid_is_pure_then_every_method_at_each_value_in_order():
    decodings = grid_decodings({"top_k": [1, 2], "epsilon": [0.01]})
    assert [(d.method, parameter_of(d)) for d in decodings][1:] == [("top_k", 1.0), ("top_k", 2.0), ("epsilon", 0.01)]
    assert decodings[0].method == "pure" and math.isnan(parameter_of(decodings[0]))


def test_support_rows_hold_each_decoding_s_terms_and_pure_s_separability(tmp_path):
    path = tmp_path / "support.parquet"
    write_support(np.array([0, 0, 1]), np.array([5, 6, 7]), MODEL, TRUTH, grid_decodings({"top_k": [1, 2]}), path)
    frame = read_parquet(path).to_pandas()
    pure, top2 = frame[frame["method"] == "pure"], frame[frame["parameter"] == 2]
    np.testing.assert_allclose(pure["false_support"], [0.2, 0.4, 0.0])
    np.testing.assert_allclose(top2["false_support"], [0.0, 3 / 7, 0.0])
    np.testing.assert_allclose(top2["lost_support"], [0.0, 0.5, 0.5])
    # row 1 separable (its true bytes' lowest m 0.3 > its zeros' highest 0.15), row 2 not (a true byte at m 0.2 under
    # a zero at 0.3), row 3 has no zero
    np.testing.assert_array_equal(pure["inseparable"].to_numpy()[:2], [0.0, 1.0])
    assert np.isnan(pure["inseparable"].iloc[2]) and top2["inseparable"].isna().all()
    np.testing.assert_array_equal(top2["kept"], [2, 2, 2])


def test_the_summary_averages_each_method_and_value_and_the_inseparable_share_of_pure_alone():
    tables = list(support_rows(np.array([0, 0, 1]), np.array([5, 6, 7]), MODEL, TRUTH, grid_decodings({"top_k": [2]})))
    frame = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
    summary = summarise_support(frame, n_boot=50, confidence=0.9, seed=0)
    by = summary.set_index(["method", "metric"])
    assert by.loc[("pure", "false_support"), "mean"] == pytest.approx(0.2)
    assert by.loc[("pure", "inseparable"), "mean"] == pytest.approx(0.5)  # the third row has no zero: left out
    assert by.loc[("top_k", "lost_support"), "mean"] == pytest.approx(1 / 3)
    assert ("top_k", "inseparable") not in by.index
    assert (summary.loc[summary["method"] == "top_k", "parameter"] == 2).all()


def _summary(method, parameter, false, lost, inseparable=None):
    rows = [{"method": method, "parameter": parameter, "metric": m, "mean": v, "sd": 0.0, "ci_low": v - 0.01,
             "ci_high": v + 0.01, "n_positions": 100, "n_prompts": 10, "n_infinite": 0}
            for m, v in (("false_support", false), ("lost_support", lost), ("inseparable", inseparable))
            if v is not None]
    return pd.DataFrame(rows)


def _table(models):
    """A support table where epsilon's curve runs (0, 0.4) -> (0.2, 0.1) and BA-epsilon's (0, 0.4) -> (0.2, 0.0)."""
    summaries = {}
    for model, share in models.items():
        summaries[model] = pd.concat([
            _summary("pure", math.nan, 0.4, 0.0, share),
            _summary("epsilon", 0.01, 0.1, 0.2),
            _summary("ba_epsilon", 0.01, 0.0, 0.2),
            _summary("typical", 0.9, 0.5, 0.3),
        ], ignore_index=True)
    return support_table(summaries)


def test_the_table_has_a_row_per_model_method_and_value_and_pure_s_inseparable_share():
    table = _table({"bn-4": 0.6, "bn-64": 0.2})
    assert list(table["method"][:4]) == ["pure", "epsilon", "ba_epsilon", "typical"] and len(table) == 8
    assert table.loc[0, "inseparable_mean"] == 0.6 and np.isnan(table.loc[1, "inseparable_mean"])


def test_a_curve_is_read_at_a_lost_support_between_its_points():
    table = _table({"bn-4": 0.6})
    eps, ba = curve(table, "bn-4", "epsilon"), curve(table, "bn-4", "ba_epsilon")
    levels = common_levels(eps, ba, 2)
    np.testing.assert_allclose(levels, [0.1, 0.2])  # the shared range (0, 0.2], its low end (pure's point) left out
    np.testing.assert_allclose(at_lost_support(eps, levels)["mean"], [0.25, 0.1])  # halfway from 0.4 to 0.1
    np.testing.assert_allclose(at_lost_support(ba, levels)["mean"], [0.2, 0.0])
    assert np.isnan(at_lost_support(eps, np.array([0.3]))["mean"][0])  # beyond the curve


def test_of_points_at_equal_lost_support_a_curve_keeps_the_least_false_support():
    # pure at (0, 0.141); BA-eta 0.001 and 0.003 remove only truth-zero bytes (no lost support), 0.01 a little more
    table = support_table({"bn-8": pd.concat([
        _summary("pure", math.nan, 0.141, 0.0, 1.0),
        _summary("ba_eta", 0.001, 0.139, 0.0),
        _summary("ba_eta", 0.003, 0.121, 0.0),
        _summary("ba_eta", 0.01, 0.106, 0.002),
    ], ignore_index=True)})
    points = curve(table, "bn-8", "ba_eta")
    assert points["parameter"].tolist() == [0.003, 0.01]
    np.testing.assert_allclose(at_lost_support(points, np.array([0.001]))["mean"], [0.1135])  # halfway 0.121 -> 0.106


def test_a_value_that_keeps_every_byte_is_pure_to_float_rounding_and_is_not_tested():
    table = _table({"bn-4": 0.6})
    pure_false = table.loc[table["method"] == "pure", "false_support_mean"].iloc[0]
    table.loc[table["method"] == "typical", ["false_support_mean", "lost_support_mean"]] = [pure_false * (1 + 1e-10),
                                                                                          0.0]
    claims = [r["claim"] for r in support_findings(table, "gt-teacher", 0.95)]
    assert not any(c.startswith("Typical") for c in claims) and any(c.startswith("Epsilon") for c in claims)


def test_support_positions_with_nan_log_probabilities_fail_naming_the_file(tmp_path):
    from test_decoded_rows import write_logits

    from oversmooth.analysis.support import aligned_rows

    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 256))
    logprobs = logits - np.logaddexp.reduce(logits, axis=-1, keepdims=True)
    prompt_id, position = np.repeat([0, 1], 3), np.tile([4, 5, 6], 2)
    write_logits(tmp_path / "truth.parquet", prompt_id, position, logprobs)
    logprobs[4, 7] = np.nan
    write_logits(tmp_path / "bn-4.parquet", prompt_id, position, logprobs)
    with pytest.raises(ValueError, match=r"bn-4\.parquet: NaN log-probabilities at 1 sampled positions .*prompt 1, "
                                         r"position 5"):
        aligned_rows(tmp_path / "bn-4.parquet", tmp_path / "truth.parquet", "all", seed=0)
    model, truth = aligned_rows(tmp_path / "truth.parquet", tmp_path / "truth.parquet", "all", seed=0)
    assert len(model.position) == 6


def test_the_support_findings_decide_each_claim():
    rows = {(r["id"], r["claim"].split()[0]): r for r in support_findings(_table({"bn-4": 0.6, "bn-64": 0.2}),
                                                                          "gt-teacher", 0.95, n_levels=2)}
    assert rows[("truncation_cuts_false_support", "Epsilon")]["verdict"] == HOLDS
    assert rows[("truncation_cuts_false_support", "Typical")]["verdict"] == FAILS  # 0.5 above pure's 0.4
    share = rows[("support_not_threshold_set", "the")]
    assert share["verdict"] == HOLDS and share["estimate"] == pytest.approx(0.2)  # the smallest share
    assert rows[("inseparable_grows_as_k_shrinks", "the")]["estimate"] == pytest.approx(0.4)
    matched = rows[("bat_keeps_less_false_support", "at")]
    # at lost support 0.1: 0.25 - 0.2; at 0.2: 0.1 - 0.0; the least favourable shown
    assert matched["verdict"] == HOLDS and matched["estimate"] == pytest.approx(0.05)


def test_no_matched_claim_where_the_curves_share_no_lost_support():
    table = _table({"bn-4": 0.6})
    assert [r["id"] for r in support_findings(table, "gt-teacher", 0.95)].count("bat_keeps_less_false_support") == 1
    table.loc[table["method"] == "ba_epsilon", "lost_support_mean"] = 0.0  # BA keeps every byte: no range shared
    table.loc[table["method"] == "ba_epsilon", "false_support_mean"] = 0.4
    rows = support_findings(table, "gt-teacher", 0.95)
    assert "bat_keeps_less_false_support" not in [r["id"] for r in rows]
    assert all(r["ci_low"] <= r["estimate"] <= r["ci_high"] for r in rows)


def test_support_is_planned_only_with_a_truth_under_a_truncating_decoding():
    smoke = load_config(REPO / "config" / "smoke.yaml")
    teacher = load_config(REPO / "config" / "smoke.yaml", REPO / "config" / "smoke-teacher.yaml")
    assert support_truth(smoke) is None and support_models(smoke) == []
    assert support_truth(teacher) == "gt-teacher" and "gt-teacher" not in support_models(teacher)
    assert {"bn-4", "gt-nanogpt"} <= set(support_models(teacher))
    names = lambda config: {o.name for o in planned_outputs(config)}  # noqa: E731
    assert {"table_support", "figure_support"} <= names(teacher) and not {"table_support"} & names(smoke)
    teacher["data"]["sources"][0]["decoding"] = {"method": "temperature", "temperature": 0.8}  # keeps every byte
    assert support_truth(teacher) is None
