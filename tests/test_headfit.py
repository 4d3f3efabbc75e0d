"""Learned rank-constrained heads on a frozen model against the SVD-imposed and from-scratch heads."""

import math

import numpy as np
import pytest
import torch

from oversmooth.analysis.headfit import HeadFitSettings, rank_loss_table
from oversmooth.models.checkpoints import save_torch
from oversmooth.models.lowrank import LowRankHead
from oversmooth.models.model import GPT, GPTConfig


def save(path, bottleneck, seed):
    torch.manual_seed(seed)
    model = GPT(GPTConfig(block_size=16, n_layer=1, n_head=2, n_embd=32, bottleneck=bottleneck)).eval()
    save_torch({"name": "m", "model_config": model.config.to_dict(), "model": model.state_dict()}, path)


def test_low_rank_head_has_rank_at_most_r():
    head = LowRankHead(n_embd=32, rank=3)
    logits = head(torch.randn(200, 32)).detach().double()
    s = torch.linalg.svdvals(logits)
    assert (s > 1e-6 * s[0]).sum().item() == 3


def test_rank_loss_table_learns_and_full_rank_truncation_is_the_source(tmp_path):
    save(tmp_path / "source.pt", bottleneck=16, seed=0)
    save(tmp_path / "bn-4.pt", bottleneck=4, seed=1)
    text = np.frombuffer(b"the cat sat on the mat. " * 400, dtype=np.uint8)
    settings = HeadFitSettings(iters=60, batch_size=8, learning_rate=0.01, eval_windows=10, seed=0)
    rows = rank_loss_table(tmp_path / "source.pt", text, text, [4, 16], {4: tmp_path / "bn-4.pt"}, settings)
    assert [r["rank"] for r in rows] == [4, 16]
    four, full = rows
    assert full["svd_imposed_loss"] == pytest.approx(full["source_loss"], rel=1e-5)  # rank 16 of a 16-wide head
    assert math.isnan(full["from_scratch_loss"]) and math.isfinite(four["from_scratch_loss"])
    assert four["learned_head_loss"] < math.log(256) - 1  # a repetitive text is learnable from frozen features
    assert rows == rank_loss_table(tmp_path / "source.pt", text, text, [4, 16], {4: tmp_path / "bn-4.pt"}, settings)
