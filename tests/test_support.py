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
