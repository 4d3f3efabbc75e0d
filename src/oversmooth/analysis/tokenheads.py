"""Rank-k heads on a frozen pretrained token-level LM (thesis ch. 8, future work: "investigate whether this is the
case for sub-word tokenised LLMs"; Godey et al. 2024): the softmax bottleneck imposed on a model whose full head is
fluent, over its whole vocabulary (SmolLM2-135M: 49,152 tokens, hidden size 576).

The body stays frozen, so the states h that the LM head reads (after the final norm) are computed once and cached;
every head is then a function of h alone, and so are its logits over the whole vocabulary. That is the track's
logits layout: instead of V = 49,152 log-probabilities per position (98 kB in float16, rounded), a states file
holds h (d = 576 float32, 2.3 kB, exact) once for all heads, and the metrics job forms each head's and the
reference's full distributions from it chunk by chunk; a new head costs its factors, not another logits file.
The heads are:
- the full head W (V x d): the reference distribution, which isolates the bottleneck (a larger source model is
  the thesis-scale option);
- the SVD head of rank k: W truncated to its best rank-k approximation (thesis ch. 7, imposed after training);
- the learned head of rank k: A (V x k) B (k x d) fitted by cross-entropy on cached states of the training text
  (Godey et al.), started from the SVD factors, so on its fitting data it can only improve on them.

This module reads and applies saved heads and cached states (what the metrics, TBAT and sampling jobs run). The
source's states are computed in `tokenstates`, the heads fitted in `tokenfit`, a head compared with the full head
in `tokenmetrics`: a change to one of those reruns its jobs and what reads their outputs, not the other way round.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import torch
import torch.nn.functional as F

from oversmooth.core.io import ParquetInput, write_parquet
from oversmooth.extraction.logit_tables import SampledRows, sample_positions
from oversmooth.models.lowrank import LowRankHead
from oversmooth.models.torchfile import load_torch, save_torch


class TokenTrackError(ValueError):
    """Token-track inputs or settings that cannot be used."""


def states_schema(hidden: int) -> pa.Schema:
    """One row per predicted token: where it is, which token, and the state h the head reads to predict it."""
    return pa.schema([
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("target", pa.int32()),
        ("state", pa.list_(pa.float32(), hidden)),
    ])


def write_states(path: str | os.PathLike, prompt_id: np.ndarray, position: np.ndarray, target: np.ndarray,
                 states: np.ndarray) -> None:
    """Write cached states (one row each) to Parquet, atomically."""
    hidden = states.shape[1]
    values = pa.array(np.ascontiguousarray(states, dtype=np.float32).reshape(-1))
    table = pa.table({
        "prompt_id": pa.array(prompt_id, pa.int32()),
        "position": pa.array(position, pa.int32()),
        "target": pa.array(target, pa.int32()),
        "state": pa.FixedSizeListArray.from_arrays(values, hidden),
    }, schema=states_schema(hidden))
    write_parquet(table, path)


def read_states(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(columns prompt_id, position, target as arrays; states (N, d) float32) of a states file."""
    table = ParquetInput(path).read()
    missing = [c for c in ("prompt_id", "position", "target", "state") if c not in table.column_names]
    if missing:
        raise TokenTrackError(f"{os.fspath(path)}: not a token-states file (no column {missing[0]!r})")
    column = table.column("state").combine_chunks()
    states = np.array(column.values.to_numpy(zero_copy_only=False)).reshape(len(table), column.type.list_size)
    return {c: table.column(c).to_numpy() for c in ("prompt_id", "position", "target")}, states


def output_weight(model) -> torch.Tensor:
    """The LM head's matrix W (vocab x hidden) of a `transformers` causal LM, detached, in float32."""
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is not None:
        raise ValueError(f"{type(model).__name__}: the LM head has a bias; a rank-k head of W alone would drop it")
    return head.weight.detach().float()


@torch.no_grad()
def head_loss(head, states: np.ndarray, targets: np.ndarray, batch_size: int = 1024) -> float:
    """Mean next-token cross-entropy (nats) of `head` (a module, or a W to multiply) on cached states."""
    total = 0.0
    for start in range(0, len(targets), batch_size):
        logits = head_logits(head, torch.from_numpy(states[start : start + batch_size]))
        total += F.cross_entropy(logits, torch.from_numpy(targets[start : start + batch_size]), reduction="sum").item()
    return total / len(targets)


def save_head(head: LowRankHead, path: str | os.PathLike, meta: dict) -> None:
    """A rank-k head's factors with `meta` (kind, rank, source, ...), atomically."""
    save_torch({"meta": meta, "up": head.up.weight.detach().cpu(), "down": head.down.weight.detach().cpu()}, path)


def load_head(path: str | os.PathLike) -> tuple[LowRankHead, dict]:
    """(head, meta) saved by `save_head`."""
    saved = load_torch(path)
    vocab, rank = saved["up"].shape
    head = LowRankHead(saved["down"].size(1), rank, vocab_size=vocab)
    with torch.no_grad():
        head.up.weight.copy_(saved["up"])
        head.down.weight.copy_(saved["down"])
    return head.eval(), saved["meta"]


@torch.no_grad()
def sampled_state_rows(head, states_path: str | os.PathLike, positions: int | str, seed: int) -> SampledRows:
    """A seeded sample of `positions` cached evaluation states (the same rows for every head), with `head`'s
    log-probabilities over the whole vocabulary (float64): TBAT's input."""
    columns, states = read_states(states_path)
    rows = sample_positions(len(states), positions, seed)
    logits = head_logits(head.cpu(), torch.from_numpy(states[rows])).double()
    return SampledRows(columns["prompt_id"][rows], columns["position"][rows], torch.log_softmax(logits, -1).numpy())


def head_matrix(head: LowRankHead) -> np.ndarray:
    """The matrix (V x k, float64) that maps a rank-k head's input (its k-dimensional code B h) to the logits:
    TBAT's W."""
    return head.up.weight.detach().double().cpu().numpy()


def token_head_matrix(head: torch.nn.Module) -> np.ndarray:
    """W (V x k, float64) of a token-track head as BAT sampling reads it: a rank-k head's up-projection
    (`head_matrix`), or tok-full's output layer (V x d)."""
    return head_matrix(head) if isinstance(head, LowRankHead) else head.weight.detach().double().cpu().numpy()


def head_logits(head, h: torch.Tensor) -> torch.Tensor:
    """Logits of a head (a module) or of a matrix W (V x d, to multiply) on states h."""
    return h @ head.T if isinstance(head, torch.Tensor) else head(h)


