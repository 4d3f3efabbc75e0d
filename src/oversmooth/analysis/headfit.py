"""A learned rank-constrained head on a frozen model (Godey et al. 2024), against the SVD-imposed head and the
bottleneck trained from scratch (thesis ch. 7's contrast of "imposed after training" and "learned with it").

The source model's body is frozen; its head is replaced by logits = A·B·h, A (256 × r) and B (r × n_embd), on the
final hidden states h (the pre-bottleneck representation). Only A and B are trained, on the training shard. All
three heads of rank r are then scored on the same seeded validation windows.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from oversmooth.analysis.rank import truncated_head
from oversmooth.models.bytelm import inference_device
from oversmooth.models.checkpoints import load_model
from oversmooth.models.lowrank import LowRankHead
from oversmooth.models.model import GPT, sample_windows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeadTraining:
    """How a head is fitted: AdamW steps, states per step, peak learning rate (cosine to zero), seed."""

    iters: int
    batch_size: int
    learning_rate: float
    seed: int


@dataclass(frozen=True)
class HeadFitSettings(HeadTraining):
    eval_windows: int = 0  # validation windows that score each head


@torch.no_grad()
def _features(model: GPT, x: torch.Tensor) -> torch.Tensor:
    return model.features(x.to(next(model.parameters()).device)).float()


def train_head(head: torch.nn.Module, next_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]], iters: int,
               learning_rate: float, label: str) -> torch.nn.Module:
    """Fit `head` (logits from input states) by AdamW on `iters` batches of `next_batch()` (states, next-token
    targets), the learning rate on a cosine from `learning_rate` to zero; progress in the log."""
    optimizer = torch.optim.AdamW(head.parameters(), lr=learning_rate, weight_decay=0.0)
    for it in range(iters):
        for group in optimizer.param_groups:
            group["lr"] = learning_rate * 0.5 * (1 + math.cos(math.pi * it / iters))
        h, y = next_batch()
        logits = head(h)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if (it + 1) % max(1, iters // 10) == 0:
            log.info("%s: iteration %d/%d, train loss %.4f", label, it + 1, iters, loss.item())
    return head.eval()


def fit_low_rank_head(model: GPT, train: np.ndarray, rank: int, settings: HeadFitSettings) -> LowRankHead:
    """Train A and B of rank `rank` on `train` with AdamW; the body of `model` stays frozen."""
    device = next(model.parameters()).device
    torch.manual_seed(settings.seed + rank)
    head = LowRankHead(model.config.n_embd, rank).to(device)
    rng = np.random.default_rng([settings.seed, rank])

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        x, y = sample_windows(train, rng, settings.batch_size, model.config.block_size)
        return _features(model, x), y.to(device)

    return train_head(head, next_batch, settings.iters, settings.learning_rate, f"rank {rank}")


@torch.no_grad()
def mean_loss(logits_of, val: np.ndarray, block_size: int, settings: HeadFitSettings) -> float:
    """Mean next-byte cross-entropy (nats) of `logits_of(x)` over the seeded validation windows."""
    rng = np.random.default_rng([settings.seed, 1])
    losses = []
    for start in range(0, settings.eval_windows, settings.batch_size):
        x, y = sample_windows(val, rng, min(settings.batch_size, settings.eval_windows - start), block_size)
        logits = logits_of(x).float()
        losses.append(F.cross_entropy(logits.view(-1, logits.size(-1)), y.to(logits.device).reshape(-1), reduction="sum").item())
    return sum(losses) / (settings.eval_windows * block_size)


def rank_loss_table(source: str | os.PathLike, train: np.ndarray, val: np.ndarray, ranks: list[int],
                    scratch: dict[int, str | os.PathLike], settings: HeadFitSettings) -> list[dict]:
    """Per rank r: validation loss of the learned rank-r head on the frozen source, of the source with its output
    matrix truncated to rank r (SVD-imposed), and of the bottleneck bn-r trained from scratch when it exists;
    and the source's own loss."""
    device = inference_device()
    model = load_model(source, device)
    for p in model.parameters():
        p.requires_grad_(False)
    block = model.config.block_size
    source_loss = mean_loss(lambda x: model(x.to(device))[0], val, block, settings)
    weight = model.output_matrix().detach().clone()
    rows = []
    for rank in ranks:
        head = fit_low_rank_head(model, train, rank, settings)
        learned = mean_loss(lambda x, head=head: head(_features(model, x)), val, block, settings)
        model.head.out.weight.copy_(truncated_head(weight, rank))
        imposed = mean_loss(lambda x: model(x.to(device))[0], val, block, settings)
        model.head.out.weight.copy_(weight)
        from_scratch = math.nan
        if rank in scratch:
            bottlenecked = load_model(scratch[rank], device)
            from_scratch = mean_loss(lambda x, m=bottlenecked: m(x.to(device))[0], val, bottlenecked.config.block_size, settings)
        rows.append({"rank": rank, "learned_head_loss": learned, "svd_imposed_loss": imposed,
                     "from_scratch_loss": from_scratch, "source_loss": source_loss})
        log.info("rank %d: learned head %.4f, SVD-imposed %.4f, from scratch %.4f (source %.4f)",
                 rank, learned, imposed, from_scratch, source_loss)
    return rows
