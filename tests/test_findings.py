"""The thesis's findings as tests: hand-computed differences and intervals, and each verdict on made-up tables."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from oversmooth.reporting.findings import (
    FAILS,
    HOLDS,
    UNDECIDED,
    Term,
    difference,
    findings_markdown,
    findings_page,
    findings_table,
    greedy_findings,
    ground_truth_findings,
    least_favourable,
    loss_matched_findings,
    oversmoothing_findings,
    quality_findings,
    support_findings,
    svd_findings,
    token_findings,
    verdict,
    z_of,
)


def test_a_difference_and_its_interval_by_hand():
    # each term's half-width 0.1 at 95 %: se 0.1 / 1.96; the difference's half-width 1.96 * sqrt(2) * 0.1 / 1.96
    estimate, low, high = difference([Term("a", 0.5, 0.4, 0.6), Term("b", 0.2, 0.1, 0.3, -1.0)], 0.95)
    assert estimate == pytest.approx(0.3)
    assert (low, high) == pytest.approx((0.3 - 0.1 * math.sqrt(2), 0.3 + 0.1 * math.sqrt(2)))
    assert z_of(0.95) == pytest.approx(1.959964, abs=1e-6)
    # a weight of 2 doubles its term's se
    estimate, low, high = difference([Term("m", 0.3, 0.2, 0.4, -2.0)], 0.95)
    assert (estimate, low, high) == pytest.approx((-0.6, -0.8, -0.4))


def test_a_claim_on_one_share_reads_its_own_interval_within_the_share_s_bounds():
    """A skewed bootstrap interval of a share near 1, [0.92, 1.0] around 0.976: re-centred on the mean it read
    [0.936, 1.016] for a share that cannot pass 1."""
    table = pd.DataFrame([{"model": "bn-4", "method": "pure", "parameter": math.nan, **{
        f"{metric}_{stat}": value for metric, values in (("false_support", (0.4, 0.39, 0.41)),
                                                         ("lost_support", (0.0, 0.0, 0.0)),
                                                         ("inseparable", (0.976, 0.92, 1.0)))
        for stat, value in zip(("mean", "ci_low", "ci_high"), values)}}])
    (row,) = [r for r in support_findings(table, "gt-teacher", 0.95) if r["id"] == "support_not_threshold_set"]
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx((0.976, 0.92, 1.0))
    # a difference of two shares: its normal interval clipped to the values it can take, [-1, 1]
    estimate, low, high = difference([Term("a", 0.99, 0.97, 1.0, bounds=(0.0, 1.0)),
                                      Term("b", 0.0, 0.0, 0.01, -1.0, bounds=(0.0, 1.0))], 0.95)
    assert estimate == pytest.approx(0.99) and high == 1.0 and low == pytest.approx(0.99 - math.hypot(0.015, 0.005))


@pytest.mark.parametrize(("low", "high", "expected"), [(0.01, 0.2, HOLDS), (-0.2, -0.01, FAILS), (-0.1, 0.1, UNDECIDED)])
def test_verdicts(low, high, expected):
    assert verdict(low, high) == expected


def metrics_table(tto, tbat=None, nsmd_excess=0.0, nsmd=None):
    """A Table 4.1 with one ground truth `gt-x`: TTO mean [mean - 0.01, mean + 0.01] per k; NSMD just below it
    (`nsmd`: k -> NSMD mean instead), with the same half-width."""
    rows = []
    for k, mean in tto.items():
        nsmd_mean = (nsmd or {}).get(k, mean - 0.001 + nsmd_excess)
        row = {"bottleneck": k, "model": f"bn-{k}", "TTO mean (gt-x)": mean, "TTO ci_low (gt-x)": mean - 0.01,
               "TTO ci_high (gt-x)": mean + 0.01, "NSMD mean (gt-x)": nsmd_mean,
               "NSMD ci_low (gt-x)": nsmd_mean - 0.01, "NSMD ci_high (gt-x)": nsmd_mean + 0.01}
        if tbat is not None:
            row |= {"TBAT mean": tbat[k][0], "TBAT ci_low": tbat[k][1], "TBAT ci_high": tbat[k][2]}
        rows.append(row)
    return pd.DataFrame(rows)


def by_id(rows):
    return {row["id"]: row for row in rows}


def test_the_thesis_shape_holds_on_a_table_that_has_it():
    table = metrics_table({4: 0.8, 32: 0.6, 256: 0.55}, tbat={4: (0.9, 0.89, 0.91), 32: (0.1, 0.09, 0.11), 256: (0, 0, 0)})
    rows = by_id(oversmoothing_findings(table, ["gt-x"], moderate_k=30, confidence=0.95))
    assert {r["verdict"] for r in rows.values()} == {HOLDS}
    assert rows["tto_levels_off"]["estimate"] == pytest.approx((0.8 - 0.6) - (0.6 - 0.55))
    assert "bn-32" in rows["tto_levels_off"]["test"]  # the bottleneck nearest moderate_k
    full_rank = rows["full_rank_oversmooths"]  # NSMD(bn-256) = 0.549, its own interval (half-width 0.01)
    assert (full_rank["estimate"], full_rank["ci_low"], full_rank["ci_high"]) == pytest.approx((0.549, 0.539, 0.559))
    assert full_rank["test"].startswith("NSMD(bn-256) > 0 ")


def test_each_claim_can_fail():
    table = metrics_table({4: 0.5, 32: 0.4, 256: 0.02}, tbat={4: (0.2, 0.19, 0.21), 32: (0.1, 0.09, 0.11),
                                                             256: (0.05, 0.04, 0.06)}, nsmd_excess=0.01,
                          nsmd={256: -0.02})
    rows = by_id(oversmoothing_findings(table, ["gt-x"], moderate_k=32, confidence=0.95))
    assert rows["tto_falls_with_k"]["verdict"] == HOLDS
    assert rows["tto_levels_off"]["verdict"] == FAILS  # 0.1 before k = 32, 0.38 after: falling faster
    assert rows["tto_levels_off"]["estimate"] == pytest.approx(0.1 - 0.38)
    assert rows["full_rank_oversmooths"]["verdict"] == FAILS  # NSMD -0.02 [-0.03, -0.01]: less tail mass than gt-x
    assert rows["nsmd_below_tto"]["verdict"] == FAILS
    assert rows["tbat_falls_with_k"]["verdict"] == FAILS  # TBAT at full rank is not 0


@pytest.mark.parametrize(("tto_full", "nsmd_full", "expected"), [
    (0.3, 0.004, UNDECIDED),  # much over-assignment, but as much under-assignment in the tail: no net leak shown
    (0.3, -0.02, FAILS),  # more tail mass under-assigned than over-assigned: spikier than the ground truth
    (0.03, 0.025, HOLDS),  # little over-assignment, all of it a net leak from the ground truth's nucleus
])
def test_the_full_rank_model_oversmooths_when_its_tail_holds_more_mass_than_the_ground_truth_s(tto_full, nsmd_full,
                                                                                             expected):
    """The reference is the ground truth's own tail mass (NSMD = TTO minus the tail mass the model under-assigns),
    not a fixed share of TTO: TTO > 0 for any model that errs at all."""
    table = metrics_table({4: 0.8, 32: 0.6, 256: tto_full}, nsmd={256: nsmd_full})
    row = by_id(oversmoothing_findings(table, ["gt-x"], moderate_k=32, confidence=0.95))["full_rank_oversmooths"]
    assert row["verdict"] == expected
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx((nsmd_full, nsmd_full - 0.01,
                                                                                nsmd_full + 0.01))
    assert row["evidence"].startswith("bn-256 ")  # the widest model's NSMD row, not a constant


def test_an_interval_that_holds_zero_is_undecided():
    table = metrics_table({4: 0.5, 256: 0.495})
    assert by_id(oversmoothing_findings(table, ["gt-x"], 32, 0.95))["tto_falls_with_k"]["verdict"] == UNDECIDED


def test_ground_truths_svd_heads_and_samples():
    table = pd.DataFrame([{"model": "bn-256", "TTO mean (gt-p)": 0.6, "TTO ci_low (gt-p)": 0.59, "TTO ci_high (gt-p)": 0.61,
                           "TTO mean (gt-h)": 0.1, "TTO ci_low (gt-h)": 0.09, "TTO ci_high (gt-h)": 0.11}])
    rows = ground_truth_findings(table, {"gt-p": "token", "gt-h": "nanogpt"}, 0.95)
    assert [(r["ground_truth"], r["verdict"]) for r in rows] == [("gt-p vs gt-h", HOLDS)]
    svd = pd.DataFrame([{"model": m, "TTO mean (gt-h)": v, "TTO ci_low (gt-h)": v - 0.01, "TTO ci_high (gt-h)": v + 0.01}
                        for m, v in (("svd-r4", 0.3), ("svd-r32", 0.35))])
    assert svd_findings(svd, ["gt-h"], 0.95)[0]["verdict"] == FAILS
    quality = pd.DataFrame([{"model": f"bn-{k}", "n_samples": 16, "bits_per_byte_mean": v, "bits_per_byte_ci_low": v - 0.1,
                             "bits_per_byte_ci_high": v + 0.1} for k, v in ((4, 5.1), (8, 5.0), (16, 4.6), (256, 4.4))])
    (row,) = quality_findings(quality, 0.95, narrow_k=8)  # no truth column: the judge alone
    assert row["test"].startswith("bits/byte(bn-8) - bits/byte(bn-16)") and row["verdict"] == HOLDS
    assert row["estimate"] == pytest.approx(0.4)


def test_under_a_truth_with_zeros_quality_is_tested_on_the_share_of_samples_it_never_writes():
    def quality(shares, truth_bits):
        return pd.DataFrame([{"model": f"bn-{k}", "n_samples": 16, "bits_per_byte_mean": 5.0 - k / 100,
                              "bits_per_byte_ci_low": 4.9 - k / 100, "bits_per_byte_ci_high": 5.1 - k / 100,
                              "truth_bits_per_byte_mean": b, "truth_bits_per_byte_ci_low": b - 0.1,
                              "truth_bits_per_byte_ci_high": b + 0.1, "truth_zero_share": z,
                              "truth_zero_share_ci_low": max(z - 0.1, 0), "truth_zero_share_ci_high": min(z + 0.1, 1)}
                             for (k, z), b in zip(shares.items(), truth_bits)])

    # bn-8 keeps the fewest samples inside the truth's support among k <= 8; bn-16 the most among the wide ones
    table = quality({4: 0.9, 8: 0.8, 16: 0.3, 256: 0.2}, [6.0, 5.0, 4.0, 3.0])
    judge, truth = quality_findings(table, 0.95, narrow_k=8)
    assert judge["ground_truth"] == "the judge" and truth["ground_truth"] == "the truth"
    assert truth["test"].startswith("truth-zero share(bn-8) - truth-zero share(bn-16) > 0")
    assert truth["estimate"] == pytest.approx(0.5) and truth["verdict"] == HOLDS
    # every bits-per-byte mean infinite (every sample holds a zero): still a finite test, on the shares
    (_, every) = quality_findings(quality({4: 1.0, 8: 1.0, 16: 1.0, 256: 1.0}, [np.inf] * 4), 0.95, narrow_k=8)
    assert every["estimate"] == 0.0 and every["ci_low"] <= every["estimate"] <= every["ci_high"]
    # a pure truth (no sample with a zero): the truth's bits per byte, as before
    (_, pure) = quality_findings(quality({4: 0.0, 8: 0.0, 16: 0.0, 256: 0.0}, [6.0, 5.0, 4.0, 3.0]), 0.95, narrow_k=8)
    assert pure["test"].startswith("bits/byte(bn-8) - bits/byte(bn-16)") and pure["estimate"] == pytest.approx(1.0)


def test_a_family_without_a_middle_or_a_full_rank_member_is_asked_only_what_it_can_answer():
    table = metrics_table({4: 0.8, 64: 0.3}, tbat={4: (0.9, 0.89, 0.91), 64: (0.2, 0.19, 0.21)})
    seeds_sd = {"bottleneck": 4, "model": "bn-4 (2 seeds: sd)", "TTO mean (gt-x)": 0.001, "NSMD mean (gt-x)": 0.002}
    table = pd.concat([table, pd.DataFrame([seeds_sd])], ignore_index=True)  # an sd row: no NSMD <= TTO there
    rows = by_id(oversmoothing_findings(table, ["gt-x"], moderate_k=32, confidence=0.95))
    assert set(rows) == {"tto_falls_with_k", "nsmd_below_tto", "tbat_falls_with_k"}
    assert rows["nsmd_below_tto"]["verdict"] == HOLDS
    assert rows["tbat_falls_with_k"]["claim"] == "TBAT falls with k" and rows["tbat_falls_with_k"]["verdict"] == HOLDS


def test_the_markdown_has_a_line_per_finding():
    table = findings_table(oversmoothing_findings(metrics_table({4: 0.8, 32: 0.6, 256: 0.55}), ["gt-x"], 32, 0.95))
    text = findings_markdown(table)
    assert text.count("\n") == 2 + len(table)
    assert "| oversmoothing falls with k | gt-x | `TTO(bn-4) - TTO(bn-256) > 0` | 1 | 0.25 [0.236, 0.264] | **holds** |" in text
    page = findings_page(table.assign(verdict=[HOLDS, HOLDS, FAILS, HOLDS]), 0.9)
    assert page.startswith("# The thesis's findings as tests\n\n4 tests: 3 holds, 1 fails, 0 undecided.")
    assert "a verdict on one run is about that run" in page
    assert "with its 90% interval" in page and page.endswith(findings_markdown(table.assign(verdict=[HOLDS, HOLDS, FAILS, HOLDS])))


def test_where_a_table_has_several_seeds_the_claims_read_their_mean_rows_and_say_how_many_runs():
    single = metrics_table({4: 0.8, 32: 0.6, 256: 0.55})
    seeds = single.assign(model=single["model"] + " (3 seeds: mean)")  # intervals made wider by the seeds
    for metric in ("TTO", "NSMD"):
        seeds[f"{metric} ci_low (gt-x)"] -= 0.09
        seeds[f"{metric} ci_high (gt-x)"] += 0.09
    table = pd.concat([single, seeds], ignore_index=True)
    rows = by_id(oversmoothing_findings(table, ["gt-x"], 32, 0.95))
    falls = rows["tto_falls_with_k"]
    assert falls["test"] == "TTO(bn-4 (3 seeds: mean)) - TTO(bn-256 (3 seeds: mean)) > 0" and falls["runs"] == 3
    assert falls["ci_high"] - falls["ci_low"] > 0.2  # the seeds' intervals (half-width 0.1), not one run's (0.01)
    assert rows["nsmd_below_tto"]["runs"] == 1  # an identity, checked on each run's row
    full_rank = rows["full_rank_oversmooths"]
    assert full_rank["test"].startswith("NSMD(bn-256 (3 seeds: mean)) > 0") and full_rank["runs"] == 3
    assert full_rank["ci_high"] - full_rank["ci_low"] == pytest.approx(0.2)  # the mean row's own interval
    one_run = by_id(oversmoothing_findings(single, ["gt-x"], 32, 0.95))["tto_falls_with_k"]
    assert one_run["runs"] == 1 and one_run["test"] == "TTO(bn-4) - TTO(bn-256) > 0"


def e_table(cells):
    """An appendix-E table of `gt-x`: cells (model, metric, method label) -> mean, intervals mean +- 0.01."""
    rows = {}
    for (model, metric, label), mean in cells.items():
        row = rows.setdefault((model, metric), {"bottleneck": int(model[3:]), "model": model, "metric": metric})
        row |= {f"{label} mean": mean, f"{label} ci_low": mean - 0.01, f"{label} ci_high": mean + 0.01}
    return pd.DataFrame(list(rows.values()))


def greedy_cells(nsmd_greedy_bn8=0.1):
    """NSMD: greedy 0.1 below every other method's 0.5, but for bn-8's greedy; KL_eps: greedy 2.0 above 1.0."""
    cells = {}
    for model in ("bn-4", "bn-8"):
        for label in ("Pure", "Temp."):
            cells |= {(model, "NSMD", label): 0.5, (model, "KL_eps", label): 1.0}
        cells |= {(model, "NSMD", "Greedy"): 0.1, (model, "KL_eps", "Greedy"): 2.0}
    cells[("bn-8", "NSMD", "Greedy")] = nsmd_greedy_bn8
    top = {(m, metric, label): 0.6 if metric == "NSMD" else 1.5 for m in ("bn-4", "bn-8") for metric in ("NSMD", "KL_eps")
           for label in ("Top-K", "Top-P")}
    return cells, top


def test_greedy_holds_only_if_it_is_lowest_in_nsmd_and_highest_in_kl_at_every_bottleneck_and_method():
    cells, top = greedy_cells()
    rows = by_id(greedy_findings({"gt-x": [e_table(cells), e_table(top)]}, 0.95))
    assert rows["greedy_lowest_nsmd"]["verdict"] == HOLDS and rows["greedy_highest_kl"]["verdict"] == HOLDS
    # the least favourable pair: NSMD 0.5 (pure or temp.) - 0.1, not top-k's 0.6 - 0.1
    assert rows["greedy_lowest_nsmd"]["estimate"] == pytest.approx(0.4)
    assert rows["greedy_highest_kl"]["estimate"] == pytest.approx(0.5)  # 2.0 - top-k's 1.5
    assert "least favourable of 8" in rows["greedy_lowest_nsmd"]["test"]
    # bn-8's greedy above pure and temp. (0.55 > 0.5), below top-k and top-p: fails, and the failing pair is shown
    cells, top = greedy_cells(nsmd_greedy_bn8=0.55)
    row = by_id(greedy_findings({"gt-x": [e_table(cells), e_table(top)]}, 0.95))["greedy_lowest_nsmd"]
    assert row["verdict"] == FAILS and row["estimate"] == pytest.approx(-0.05) and "bn-8" in row["test"]
    # without greedy among the methods, nothing is asked
    assert greedy_findings({"gt-x": [e_table(top)]}, 0.95) == []


def test_one_undecided_pair_leaves_the_claim_undecided_one_failed_pair_fails_it():
    rows = [{"verdict": HOLDS, "ci_low": 0.1, "ci_high": 0.3, "test": "a"},
            {"verdict": UNDECIDED, "ci_low": -0.1, "ci_high": 0.3, "test": "b"}]
    assert least_favourable(rows, "note")["verdict"] == UNDECIDED
    assert least_favourable(rows, "note")["test"] == "b (note: the least favourable of 2)"
    rows.append({"verdict": FAILS, "ci_low": -0.3, "ci_high": -0.05, "test": "c"})
    assert least_favourable(rows, "note")["verdict"] == FAILS


def test_a_pair_without_an_interval_leaves_the_claim_undecided_in_either_order():
    rows = [{"verdict": HOLDS, "ci_low": 0.1, "ci_high": 0.3, "test": "a"},
            {"verdict": UNDECIDED, "ci_low": math.nan, "ci_high": math.nan, "test": "b"}]
    for order in (rows, rows[::-1]):
        shown = least_favourable(order, "note")
        assert shown["verdict"] == UNDECIDED and shown["test"].startswith("b ")


def loss_matched(levels):
    """A loss-matched table: per level (loss, {model: (mean, ci_low, ci_high)}), TBAT rows and one TTO row."""
    rows = []
    for loss, cells in levels:
        row = {"ground_truth": "-", "method": "pure", "metric": "TBAT", "val_loss": loss, "n_bottlenecks": len(cells)}
        for model, (mean, low, high) in cells.items():
            row |= {model: mean, f"{model} ci_low": low, f"{model} ci_high": high}
        rows.append(row)
    rows.append(rows[0] | {"metric": "TTO", "ground_truth": "gt-x"})
    return pd.DataFrame(rows)


def test_at_matched_loss_the_narrowest_against_the_widest_at_every_loss():
    table = loss_matched([(2.5, {"bn-4": (0.5, 0.4, 0.6), "bn-8": (0.3, 0.2, 0.4), "bn-32": (0.1, 0.05, 0.15)}),
                          (2.2, {"bn-8": (0.3, 0.25, 0.35), "bn-32": (0.1, 0.05, 0.15)}),
                          (2.0, {"bn-32": (0.1, 0.05, 0.15)})])  # one bottleneck only: no comparison
    row = loss_matched_findings(table, 0.95)[0]
    # at 2.5: bn-4 - bn-32 = 0.4, half-widths 0.1 and 0.05; at 2.2: bn-8 - bn-32 = 0.2, 0.05 and 0.05 (lower bottom)
    assert row["verdict"] == HOLDS and row["estimate"] == pytest.approx(0.2)
    assert row["ci_low"] == pytest.approx(0.2 - 0.05 * math.sqrt(2))
    assert "TBAT(bn-8) - TBAT(bn-32) at validation loss 2.200" in row["test"] and "of 2)" in row["test"]
    table = loss_matched([(2.5, {"bn-4": (0.1, 0.0, 0.2), "bn-32": (0.1, 0.05, 0.15)})])
    assert loss_matched_findings(table, 0.95)[0]["verdict"] == UNDECIDED
    assert loss_matched_findings(loss_matched([(2.0, {"bn-32": (0.1, 0.05, 0.15)})]), 0.95) == []


def token_tables(pure: dict, top_p: dict, unargmaxable: int | None, failed: int = 0, duplicated: int = 0):
    """The token track's Tables E.7 (pure), E.8 (top-p) and B: model -> (TBAT mean, ci_low, ci_high); the full
    head's unargmaxable count, its duplicated rows among them (None: no Table B row for it)."""
    def tbat(cells, label):
        return pd.DataFrame([{"model": m, f"{label} mean": c[0], f"{label} ci_low": c[1], f"{label} ci_high": c[2]}
                             for m, c in cells.items()])

    table_b = None if unargmaxable is None else pd.DataFrame(
        [{"model": "tok-full", "kind": "full", "k": 576, "vocabulary": 49152, "n_unargmaxable": unargmaxable,
          "n_duplicated": duplicated, "n_failed": failed}])
    return tbat(pure, "Pure"), tbat(top_p, "Top-P"), table_b


def test_a_real_lm_s_tbat_falls_from_each_kind_s_narrowest_head_to_the_full_head_where_it_is_analysed():
    pure = {"tok-svd-r4": (0.9, 0.8, 1.0), "tok-learned-r4": (0.7, 0.6, 0.8), "tok-svd-r64": (0.5, 0.4, 0.6),
            "tok-learned-r64": (float("nan"),) * 3, "tok-full": (0.3, 0.25, 0.35)}
    rows = token_findings(*token_tables(pure, {}, None), 0.95)
    falls = [r for r in rows if r["id"] == "token_tbat_falls_with_rank"]
    assert [r["test"] for r in falls] == ["TBAT(tok-svd-r4) - TBAT(tok-full) > 0 (pure)",
                                          "TBAT(tok-learned-r4) - TBAT(tok-full) > 0 (pure)"]
    half = math.sqrt(0.1 ** 2 + 0.05 ** 2)  # each term's half-width, combined independently
    assert (falls[0]["estimate"], falls[0]["ci_low"], falls[0]["ci_high"]) == pytest.approx((0.6, 0.6 - half,
                                                                                               0.6 + half))
    assert falls[0]["verdict"] == HOLDS and falls[0]["runs"] == 1
    top_p = {"tok-svd-r64": (0.1, 0.05, 0.15), "tok-full": (float("nan"),) * 3}  # the full head's top-p not computed
    (truncated,) = [r for r in token_findings(*token_tables(pure, top_p, None), 0.95)
                    if r["id"] == "token_top_p_removes_tbat"]
    assert truncated["test"].startswith("TBAT(tok-svd-r64) - 2 TBAT(top-p | tok-svd-r64)")  # the widest head with both
    without_full = token_findings(*token_tables({m: c for m, c in pure.items() if m != "tok-full"}, {}, None), 0.95)
    assert [r["test"] for r in without_full] == ["TBAT(tok-svd-r4) - TBAT(tok-svd-r64) > 0 (pure)"]  # learned: one k


def test_top_p_removes_most_of_the_full_head_s_bat_rejected_mass_only_beyond_half_of_it():
    pure = {"tok-svd-r4": (0.9, 0.8, 1.0), "tok-full": (0.3, 0.2, 0.4)}
    row = next(r for r in token_findings(*token_tables(pure, {"tok-full": (0.1, 0.05, 0.15)}, None), 0.95)
               if r["id"] == "token_top_p_removes_tbat")
    half = math.sqrt(0.1 ** 2 + (2 * 0.05) ** 2)  # top-p's term enters twice
    assert row["test"] == "TBAT(tok-full) - 2 TBAT(top-p | tok-full) > 0 (pure against top-p)"
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx((0.1, 0.1 - half, 0.1 + half))
    assert row["verdict"] == UNDECIDED  # a third of it left: more than half removed, but not decidedly
    narrow = {"tok-svd-r4": (0.9, 0.8, 1.0), "tok-full": (0.3, 0.29, 0.31)}
    row = next(r for r in token_findings(*token_tables(narrow, {"tok-full": (0.2, 0.19, 0.21)}, None), 0.95)
               if r["id"] == "token_top_p_removes_tbat")
    assert row["verdict"] == FAILS and row["estimate"] == pytest.approx(-0.1)


@pytest.mark.parametrize("count, duplicated, failed, expected", [
    (3, 0, 0, HOLDS), (0, 0, 0, FAILS), (0, 0, 2, UNDECIDED), (1, 0, 2, HOLDS),
    (15, 15, 0, FAILS),  # SmolLM2's full head: its 15 duplicated rows only, each kept from the argmax by a tie
    (17, 15, 0, HOLDS)])
def test_whether_the_full_head_has_unargmaxable_tokens_is_its_exact_count_besides_its_duplicates(count, duplicated,
                                                                                                  failed, expected):
    (row,) = token_findings(None, None, token_tables({}, {}, count, failed, duplicated)[2], 0.95)
    assert row["id"] == "full_head_unargmaxable" and row["verdict"] == expected
    certified = count - duplicated
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == (certified, certified, certified)
    assert f"{certified} of 49152 tokens unargmaxable besides {duplicated} duplicated rows, {failed} undecided" \
        in row["evidence"]


def every_kind_of_finding():
    """One row of each claim, from the made-up tables above, holding and failing."""
    rows = []
    for tto, nsmd_excess in (({4: 0.8, 32: 0.6, 256: 0.55}, 0.0), ({4: 0.5, 32: 0.4, 256: 0.02}, 0.01)):
        table = metrics_table(tto, tbat={4: (0.2, 0.19, 0.21), 32: (0.1, 0.09, 0.11), 256: (0, 0, 0)},
                              nsmd_excess=nsmd_excess)
        rows += oversmoothing_findings(table, ["gt-x"], moderate_k=32, confidence=0.95)
    cells, top = greedy_cells()
    rows += greedy_findings({"gt-x": [e_table(cells), e_table(top)]}, 0.95)
    table = loss_matched([(2.5, {"bn-4": (0.5, 0.4, 0.6), "bn-32": (0.1, 0.05, 0.15)})])
    rows += token_findings(*token_tables({"tok-svd-r4": (0.9, 0.8, 1.0), "tok-full": (0.3, 0.25, 0.35)},
                                         {"tok-full": (0.1, 0.05, 0.15)}, unargmaxable=0), 0.95)
    rows += token_findings(*token_tables({"tok-svd-r4": (0.2, 0.1, 0.3), "tok-svd-r64": (0.6, 0.5, 0.7)},
                                         {"tok-svd-r64": (0.01, 0.0, 0.02)}, unargmaxable=None), 0.95)
    return rows + loss_matched_findings(table, 0.95)


def test_every_test_reads_estimate_above_zero_so_the_estimate_s_sign_is_the_test_s():
    rows = every_kind_of_finding()
    assert {r["id"] for r in rows} >= {"tto_falls_with_k", "tto_levels_off", "full_rank_oversmooths", "nsmd_below_tto",
                                       "tbat_falls_with_k", "greedy_lowest_nsmd", "matched_loss_tbat",
                                       "token_tbat_falls_with_rank", "token_top_p_removes_tbat",
                                       "full_head_unargmaxable"}
    assert {r["verdict"] for r in rows if r["id"].startswith("token_")} == {HOLDS, FAILS, UNDECIDED}
    for row in rows:
        # "<the estimated quantity> > 0" (or >= 0): never a test whose estimate is the negative of what it compares
        assert re.search(r" >=? 0( |$)", row["test"]) and not re.search(r" <=? 0( |$)", row["test"]), row["test"]
        if row["verdict"] == HOLDS:
            assert row["estimate"] >= 0, row
        if row["verdict"] == FAILS and row["id"] != "tbat_falls_with_k":  # it fails on its second part, TBAT = 0
            assert row["estimate"] <= 0, row
    nsmd = [r for r in rows if r["id"] == "nsmd_below_tto"]
    assert [r["estimate"] for r in nsmd] == pytest.approx([0.001, -0.009])  # min over rows of TTO - NSMD
