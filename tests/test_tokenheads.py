"""Rank-k heads on a frozen token-level LM, on `tiny_token_lm` (conftest: a random Llama over 300 tokens, hidden
size 32, saved with `save_pretrained`)."""

import numpy as np
import pytest
import torch

from oversmooth.headfit import HeadTraining
from oversmooth.quality import load_causal_lm
from oversmooth.tokenheads import (
    final_hidden_states,
    head_loss,
    learned_head,
    output_weight,
    oversmoothing_against_full,
    svd_head,
)


@pytest.fixture(scope="module")
def cached(tiny_token_lm):
    model, tokenizer = load_causal_lm(tiny_token_lm)
    ids = np.array(tokenizer("the cat sat on the mat. a caté, then tea. " * 12)["input_ids"])
    states, targets = final_hidden_states(model, ids, block=16, batch_size=3)
    return model, ids, states, targets


def test_cached_states_times_the_head_are_the_model_s_logits(cached):
    model, ids, states, targets = cached
    n_blocks = (len(ids) - 1) // 16
    assert states.shape == (n_blocks * 16, 32) and targets.tolist() == ids[1 : n_blocks * 16 + 1].tolist()
    with torch.no_grad():
        logits = model(torch.from_numpy(ids[16:32][None])).logits[0]  # block 1 reads tokens 16..31
    assert torch.allclose(torch.from_numpy(states[16:32]) @ output_weight(model).T, logits, atol=1e-4)
    with pytest.raises(ValueError, match="too few for one block of 16"):
        final_hidden_states(model, ids[:10], block=16, batch_size=1)


@pytest.mark.parametrize("rank", [1, 3, 8])
def test_the_svd_head_s_logits_have_rank_at_most_k_and_full_rank_is_the_head(cached, rank):
    model, _, states, _ = cached
    weight = output_weight(model)
    with torch.no_grad():
        logits = svd_head(weight, rank)(torch.from_numpy(states)).double()
    assert torch.linalg.matrix_rank(logits, rtol=1e-5).item() <= rank  # float32 logits: rounding noise aside
    with torch.no_grad():
        full = svd_head(weight, 32)(torch.from_numpy(states))
    assert torch.allclose(full, torch.from_numpy(states) @ weight.T, atol=1e-4)
    with pytest.raises(ValueError, match="rank 33 must lie in 1..32"):
        svd_head(weight, 33)


def test_the_learned_head_fits_its_data_better_than_the_svd_head_of_the_same_rank(cached):
    model, _, states, targets = cached
    weight = output_weight(model)
    settings = HeadTraining(iters=60, batch_size=64, learning_rate=3e-3, seed=0)
    for rank in (2, 4):
        learned = learned_head(weight, states, targets, rank, settings)
        assert head_loss(learned, states, targets) < head_loss(svd_head(weight, rank), states, targets)


def test_oversmoothing_against_the_full_head_is_zero_at_full_rank_and_grows_as_k_falls(cached):
    model, _, states, _ = cached
    weight = output_weight(model)
    full = oversmoothing_against_full(svd_head(weight, 32), weight, states, tau=0.9)
    assert np.abs(full["tto"]).max() < 1e-5 and np.abs(full["tv"]).max() < 1e-5
    low, mid = (oversmoothing_against_full(svd_head(weight, k), weight, states, tau=0.9) for k in (1, 8))
    assert low["tto"].mean() > mid["tto"].mean() > 0 and (low["nsmd"] <= low["tto"] + 1e-12).all()
    assert np.array_equal(oversmoothing_against_full(weight, weight, states, tau=0.9)["tv"], np.zeros(len(states)))
