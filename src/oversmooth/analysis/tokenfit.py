"""Building the token track's rank-k heads (`tokenheads`) on the source LM's full head W: the SVD head (W's
truncated SVD) and the learned head (fitted by cross-entropy on the cached training states, from the SVD factors)."""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import torch

from oversmooth.analysis.headfit import HeadTraining, train_head
from oversmooth.analysis.rank import truncated_svd
from oversmooth.analysis.tokenheads import TokenTrackError, output_weight, read_states
from oversmooth.models.lowrank import LowRankHead

log = logging.getLogger(__name__)


def check_rank(weight: torch.Tensor, rank: int) -> None:
    if not 1 <= rank < weight.size(1):
        raise TokenTrackError(f"tokens.ranks: {rank} is not below the source's hidden size {weight.size(1)} (its full "
                              "rank is the reference head tok-full)")


def svd_head(weight: torch.Tensor, rank: int) -> LowRankHead:
    """The rank-`rank` head whose matrix A B is W's truncated SVD (factors U S^1/2 and S^1/2 V^T, in float64)."""
    u, s, vh = truncated_svd(weight, rank)
    root = s.sqrt()
    head = LowRankHead(weight.size(1), rank, vocab_size=weight.size(0))
    with torch.no_grad():
        head.up.weight.copy_((u * root).float())
        head.down.weight.copy_((root[:, None] * vh).float())
    return head.eval()


def learned_head(weight: torch.Tensor, states: np.ndarray, targets: np.ndarray, rank: int,
                 settings: HeadTraining) -> LowRankHead:
    """A rank-`rank` head fitted by cross-entropy on cached (state, next token) pairs, from the SVD head, on W's
    device."""
    torch.manual_seed(settings.seed + rank)
    device = weight.device
    head = svd_head(weight, rank).to(device).train()
    rng = np.random.default_rng([settings.seed, rank])
    h, y = torch.from_numpy(states), torch.from_numpy(targets.astype(np.int64))

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.from_numpy(rng.integers(0, len(y), size=settings.batch_size))
        return h[rows].to(device), y[rows].to(device)

    return train_head(head, next_batch, settings.iters, settings.learning_rate, f"learned head k={rank}")


def build_head(model, settings: dict, states_path: str | os.PathLike | None) -> tuple[LowRankHead, dict]:
    """The head `settings` describe (kind `svd` or `learned`, rank, and a learned head's fit_iters, fit_batch_size,
    learning_rate and seed) on `model`'s W, with its metadata; a learned head reads the training states."""
    weight = output_weight(model)
    kind, rank = settings["kind"], settings["rank"]
    check_rank(weight, rank)
    started = time.perf_counter()
    if kind == "svd":
        head = svd_head(weight, rank)
    elif kind == "learned":
        if states_path is None:
            raise TokenTrackError(f"a learned head (rank {rank}) needs the cached training states")
        columns, states = read_states(states_path)
        training = HeadTraining(iters=settings["fit_iters"], batch_size=settings["fit_batch_size"],
                                learning_rate=settings["learning_rate"], seed=settings["seed"])
        head = learned_head(weight, states, columns["target"], rank, training)
    else:
        raise TokenTrackError(f"unknown head kind {kind!r} (config `tokens.heads`: svd, learned)")
    log.info("%s head of rank %d over %d tokens in %.1f s", kind, rank, weight.size(0), time.perf_counter() - started)
    return head.cpu(), {**settings, "vocab_size": weight.size(0), "hidden_size": weight.size(1)}

