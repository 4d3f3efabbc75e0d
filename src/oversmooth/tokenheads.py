"""Rank-k heads on a frozen pretrained token-level LM (thesis ch. 8, future work: "investigate whether this is the
case for sub-word tokenised LLMs"; Godey et al. 2024): the softmax bottleneck imposed on a model whose full head is
fluent, over its whole vocabulary (SmolLM2-135M: 49,152 tokens, hidden size 576).

The body stays frozen, so the states h that the LM head reads (after the final norm) are computed once and cached;
every head is then a function of h alone:
- the full head W (V x d): the reference distribution, which isolates the bottleneck (a larger source model is
  the thesis-scale option);
- the SVD head of rank k: W truncated to its best rank-k approximation (thesis ch. 7, imposed after training);
- the learned head of rank k: A (V x k) B (k x d) fitted by cross-entropy on cached states of the training text
  (Godey et al.), started from the SVD factors, so on its fitting data it can only improve on them.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F

from oversmooth.headfit import HeadTraining, LowRankHead, train_head
from oversmooth.metrics import oversmoothing
from oversmooth.rank import truncated_svd

log = logging.getLogger(__name__)


def output_weight(model) -> torch.Tensor:
    """The LM head's matrix W (vocab x hidden) of a `transformers` causal LM, detached, in float32."""
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError(f"{type(model).__name__}: the LM head has a bias; a rank-k head of W alone would drop it")
    return head.weight.detach().float()


@torch.no_grad()
def final_hidden_states(model, token_ids: np.ndarray, block: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(states h (N, d) float32, next-token targets (N,) int64) over consecutive blocks of `block + 1` tokens of
    `token_ids` (each block predicts its last `block` tokens; a remainder shorter than a block is dropped): the
    inputs of the LM head, so that logits = h W^T."""
    ids = torch.as_tensor(np.asarray(token_ids, dtype=np.int64))
    n_blocks = (len(ids) - 1) // block
    if n_blocks < 1:
        raise ValueError(f"{len(ids)} tokens are too few for one block of {block} + 1")
    windows = ids[: n_blocks * block + 1].unfold(0, block + 1, block)  # overlapping by one token
    device = next(model.parameters()).device
    states, targets = [], []
    for start in range(0, n_blocks, batch_size):
        chunk = windows[start : start + batch_size]
        out = model.base_model(input_ids=chunk[:, :-1].to(device))
        states.append(out.last_hidden_state.float().reshape(-1, out.last_hidden_state.size(-1)).cpu())
        targets.append(chunk[:, 1:].reshape(-1))
        log.info("hidden states: block %d/%d", min(start + batch_size, n_blocks), n_blocks)
    return torch.cat(states).numpy(), torch.cat(targets).numpy()


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
    """A rank-`rank` head fitted by cross-entropy on cached (state, next token) pairs, from the SVD head."""
    torch.manual_seed(settings.seed + rank)
    head = svd_head(weight, rank).train()
    rng = np.random.default_rng([settings.seed, rank])
    h, y = torch.from_numpy(states), torch.from_numpy(targets)

    def next_batch() -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.from_numpy(rng.integers(0, len(y), size=settings.batch_size))
        return h[rows], y[rows]

    return train_head(head, next_batch, settings.iters, settings.learning_rate, f"learned head k={rank}")


@torch.no_grad()
def head_loss(head, states: np.ndarray, targets: np.ndarray, batch_size: int = 1024) -> float:
    """Mean next-token cross-entropy (nats) of `head` (a module, or a W to multiply) on cached states."""
    total = 0.0
    for start in range(0, len(targets), batch_size):
        logits = _logits(head, torch.from_numpy(states[start : start + batch_size]))
        total += F.cross_entropy(logits, torch.from_numpy(targets[start : start + batch_size]), reduction="sum").item()
    return total / len(targets)


@torch.no_grad()
def oversmoothing_against_full(head, weight: torch.Tensor, states: np.ndarray, tau: float,
                               batch_size: int = 256) -> dict[str, np.ndarray]:
    """Per state: TTO, NSMD, TV, KL, KL_eps and entropy difference of `head`'s distribution against the full
    head's (the reference), over the whole vocabulary, in float64."""
    parts: dict[str, list[np.ndarray]] = {}
    for start in range(0, len(states), batch_size):
        h = torch.from_numpy(states[start : start + batch_size])
        reference = torch.log_softmax((h @ weight.T).double(), -1)
        values = oversmoothing(torch.log_softmax(_logits(head, h).double(), -1), reference, tau)
        for name, value in values.items():
            parts.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


def _logits(head, h: torch.Tensor) -> torch.Tensor:
    return h @ head.T if isinstance(head, torch.Tensor) else head(h)
