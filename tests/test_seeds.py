"""Across-seed rows of the tables, against hand-computed cases."""

import numpy as np
import pandas as pd
import pytest

from oversmooth.reporting.seeds import combined_interval, with_seed_rows, without_seed_rows


def test_without_prompt_noise_the_interval_is_the_student_t_interval_over_seeds():
    low, high = combined_interval(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0]))
    half = 4.302653 / np.sqrt(3)  # t(0.975, 2) * s / sqrt(n), s = 1
    assert (low, high) == pytest.approx((2 - half, 2 + half), rel=1e-6)


def test_without_seed_noise_the_interval_is_the_runs_shared_bootstrap_interval():
    low, high = combined_interval(np.array([1.0, 1.0]), np.array([0.9, 0.9]), np.array([1.1, 1.1]))
    assert (low, high) == pytest.approx((0.9, 1.1))


def test_both_sources_add_in_variance_with_satterthwaite_degrees_of_freedom():
    low, high = combined_interval(np.array([1.0, 3.0]), np.array([0.9, 2.9]), np.array([1.1, 3.1]))
    between, within = 2.0 / 2, (0.1 / 1.959964) ** 2
    se = np.sqrt(between + within)
    df = se**4 / between**2  # n - 1 = 1
    from scipy import stats
    assert high - 2 == pytest.approx(stats.t.ppf(0.975, df) * se, rel=1e-6) and 2 - low == pytest.approx(high - 2)
    assert df > 1 and stats.t.ppf(0.975, df) < stats.t.ppf(0.975, 1)


def test_a_bottleneck_with_two_runs_gains_a_mean_and_an_sd_row_after_its_runs():
    table = pd.DataFrame({
        "bottleneck": [4, 4, 8], "model": ["bn-4", "bn-4-s7", "bn-8"], "role": ["bottleneck"] * 3,
        "TTO mean (gt)": [0.5, 0.7, 0.4], "TTO ci_low (gt)": [0.45, 0.65, 0.35], "TTO ci_high (gt)": [0.55, 0.75, 0.45],
        "n": [100, 100, 100], "note": ["a", "b", "c"],
    })
    out = with_seed_rows(table)
    assert list(out["model"]) == ["bn-4", "bn-4-s7", "bn-4 (2 seeds: mean)", "bn-4 (2 seeds: sd)", "bn-8"]
    mean, sd = out.iloc[2], out.iloc[3]
    assert mean["TTO mean (gt)"] == pytest.approx(0.6) and sd["TTO mean (gt)"] == pytest.approx(np.sqrt(0.02))
    assert mean["bottleneck"] == sd["bottleneck"] == 4 and mean["role"] == "bottleneck"
    assert pd.isna(mean["note"])  # differs between the runs: no summary
    assert mean["n"] == 100 and sd["n"] == 0
    assert (mean["TTO ci_low (gt)"], mean["TTO ci_high (gt)"]) == pytest.approx(combined_interval(
        np.array([0.5, 0.7]), np.array([0.45, 0.65]), np.array([0.55, 0.75])))
    assert pd.isna(sd["TTO ci_low (gt)"]) and pd.isna(sd["TTO ci_high (gt)"])
    pd.testing.assert_frame_equal(out.iloc[[0, 1, 4]].reset_index(drop=True), table, check_dtype=False)


def test_seed_rows_are_per_row_key_and_a_table_without_seed_runs_is_unchanged():
    table = pd.DataFrame({"model": ["bn-4", "bn-4", "bn-4-s3", "bn-4-s3"], "method": ["Pure", "Greedy"] * 2,
                          "perplexity_mean": [10.0, 4.0, 14.0, 6.0]})
    out = with_seed_rows(table)
    means = out[out["model"] == "bn-4 (2 seeds: mean)"].set_index("method")["perplexity_mean"]
    assert means.to_dict() == {"Pure": 12.0, "Greedy": 5.0}
    single = table[table["model"] == "bn-4"]
    assert with_seed_rows(single).equals(single.reset_index(drop=True))


def test_a_written_table_read_back_without_its_seed_rows_is_its_runs():
    table = pd.DataFrame({"model": ["bn-4", "bn-4-s3", "bn-8"], "layer": [0, 0, 0], "anisotropy": [0.2, 0.4, 0.3]})
    written = with_seed_rows(table)
    assert len(written) == 5
    pd.testing.assert_frame_equal(without_seed_rows(written), table, check_dtype=False)
    # a model whose name merely contains "seeds" stays
    odd = pd.DataFrame({"model": ["bn-4 (seeds)", "gt-x"], "anisotropy": [0.1, 0.2]})
    pd.testing.assert_frame_equal(without_seed_rows(odd), odd)
