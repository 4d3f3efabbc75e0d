"""Teacher-forced next-byte log-probabilities of a model over every evaluation window, to Parquet.

For each prompt, position t of the window is predicted from the prompt's context and the window's
first t bytes. A window and its context that fit in the model's block are one forward pass; a
longer one is split into passes of `stride` targets, each pass seeing at least `min_context`
real bytes before its first target (never padding, never the window start alone). Passes of all
prompts are batched (right-padded; causal attention keeps padding out of every real position).

Files (their schema and reading in `logit_tables`), one row per (prompt, position), rows in (prompt_id, position)
order, row groups of `ROW_GROUP_ROWS` rows so that two models' files line up group by group:
- `<model>.parquet`: LOGITS_SCHEMA.
- `<model>.hidden.parquet`: `hidden_schema`, for a seeded subset of positions shared by all models.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from oversmooth.core.io import atomic_path
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import (
    LOGITS_SCHEMA,
    LogitsError,
    RowGroupWriter,
    fixed_list,
    hidden_schema,
)
from oversmooth.models.bytelm import ByteLM
from oversmooth.models.model import bf16_autocast

log = get_logger("logits")

@dataclass(frozen=True)
class Pass:
    """One forward pass: `inputs` bytes predict window positions `first .. first + count - 1`;
    the prediction of position `first` is the output at index `out_start`."""

    prompt_index: int
    first: int
    count: int
    inputs: bytes
    out_start: int


def plan_passes(prompt_index: int, context: bytes, window: bytes, block: int, min_context: int) -> list[Pass]:
    """Forward passes that predict every byte of `window` from its real left context (context + window)."""
    if not context:
        raise LogitsError(f"prompt {prompt_index} has no left context: its first byte cannot be predicted")
    if not 1 <= min_context <= block:
        raise LogitsError(f"logits.min_context ({min_context}) must be between 1 and the block size ({block})")
    text, c = context + window, len(context)
    if len(text) - 1 <= block:
        return [Pass(prompt_index, 0, len(window), text[:-1], c - 1)]
    stride = block + 1 - min_context
    passes = []
    for first in range(0, len(window), stride):
        end = min(first + stride, len(window))  # targets are text[c + first : c + end]
        start = max(0, c + end - 1 - block)
        passes.append(Pass(prompt_index, first, end - first, text[start : c + end - 1], c + first - 1 - start))
    return passes


def hidden_subset(n_prompts: int, window: int, n_positions: int, seed: int) -> set[tuple[int, int]]:
    """A seeded sample of (prompt_id, position) pairs, the same for every model of a config."""
    total = n_prompts * window
    chosen = np.random.default_rng(seed).choice(total, size=min(n_positions, total), replace=False)
    return {(int(i // window), int(i % window)) for i in chosen}


def extract_logits(
    lm: ByteLM,
    prompts: pa.Table,
    logits_path: str | os.PathLike,
    hidden_path: str | os.PathLike,
    *,
    batch_size: int,
    min_context: int | None,
    hidden_positions: int,
    seed: int,
    bf16: bool | None = None,
) -> dict:
    """Write the log-probabilities of every window position, and hidden states of a subset of them.

    `bf16`: bf16 autocast (default: on CUDA only; True runs the same mixed precision on CPU)."""
    ids = prompts.column("prompt_id").to_pylist()
    contexts, windows = prompts.column("context").to_pylist(), prompts.column("window").to_pylist()
    window = len(windows[0])
    if any(len(w) != window for w in windows):
        raise LogitsError("prompts.parquet holds windows of different lengths; rebuild the prompts")
    block = lm.block_size
    min_context = block // 2 if min_context is None else min_context
    passes = [p for i in range(len(ids)) for p in plan_passes(i, contexts[i], windows[i], block, min_context)]
    subset = hidden_subset(len(ids), window, hidden_positions, seed)
    device = _lm_device(lm)
    log.info(
        "%s: %d prompts x %d positions in %d forward passes (block %d, >= %d context bytes per position), on %s",
        lm.name, len(ids), window, len(passes), block, min_context, device,
    )
    started, done = time.perf_counter(), 0
    with atomic_path(logits_path) as tmp_logits, atomic_path(hidden_path) as tmp_hidden:
        logits_writer = RowGroupWriter(tmp_logits, LOGITS_SCHEMA)
        hidden_rows: list[tuple[int, int, np.ndarray, np.ndarray]] = []
        for first in range(0, len(passes), batch_size):
            batch = passes[first : first + batch_size]
            out = _forward(lm, batch, device, bf16)
            dims = out.pre.shape[-1], out.post.shape[-1]
            for j, p in enumerate(batch):
                rows = slice(p.out_start, p.out_start + p.count)
                positions = np.arange(p.first, p.first + p.count)
                targets = np.frombuffer(windows[p.prompt_index], dtype=np.uint8)[p.first : p.first + p.count]
                logits_writer.write(_logits_table(ids[p.prompt_index], positions, targets, out.logprobs[j, rows]))
                for t in positions:
                    if (p.prompt_index, int(t)) in subset:
                        k = p.out_start + int(t) - p.first
                        hidden_rows.append((ids[p.prompt_index], int(t), out.pre[j, k], out.post[j, k]))
            done += len(batch)
            _log_progress(lm.name, done, len(passes), started)
        logits_writer.close()
        _write_hidden(tmp_hidden, hidden_rows, *dims)
    seconds = time.perf_counter() - started
    log.info("%s: wrote %d positions in %.1f s", lm.name, len(ids) * window, seconds)
    return {"model": lm.name, "positions": len(ids) * window, "passes": len(passes), "seconds": seconds}


def _lm_device(lm: ByteLM) -> torch.device:
    model = getattr(lm, "model", None)
    return next(model.parameters()).device if model is not None else torch.device("cpu")


def _forward(lm: ByteLM, batch: Sequence[Pass], device: torch.device, bf16: bool | None):
    """One batched forward pass over right-padded inputs; outputs moved to CPU as NumPy."""
    width = max(len(p.inputs) for p in batch)
    x = torch.zeros((len(batch), width), dtype=torch.long)
    for j, p in enumerate(batch):
        x[j, : len(p.inputs)] = torch.frombuffer(bytearray(p.inputs), dtype=torch.uint8).long()
    with torch.no_grad(), bf16_autocast(device, bf16):
        out = lm.next_byte_outputs(x.to(device), outputs_from=[p.out_start for p in batch])
    return type(out)(*(t.float().cpu().numpy() for t in out))


def _logits_table(prompt_id: int, positions: np.ndarray, targets: np.ndarray, logprobs: np.ndarray) -> pa.Table:
    n = len(positions)
    return pa.Table.from_arrays(
        [
            pa.array(np.full(n, prompt_id, dtype=np.int32)),
            pa.array(positions.astype(np.int32)),
            pa.array(targets),
            fixed_list(logprobs),
        ],
        schema=LOGITS_SCHEMA,
    )


def _write_hidden(path: os.PathLike, rows: list[tuple[int, int, np.ndarray, np.ndarray]], pre_dim: int, post_dim: int) -> None:
    rows.sort(key=lambda r: (r[0], r[1]))
    schema = hidden_schema(pre_dim, post_dim)
    table = pa.Table.from_arrays(
        [
            pa.array([r[0] for r in rows], pa.int32()),
            pa.array([r[1] for r in rows], pa.int32()),
            fixed_list(np.stack([r[2] for r in rows]) if rows else np.zeros((0, pre_dim))),
            fixed_list(np.stack([r[3] for r in rows]) if rows else np.zeros((0, post_dim))),
        ],
        schema=schema,
    )
    pq.write_table(table, path)


def _log_progress(name: str, done: int, total: int, started: float) -> None:
    every = max(1, total // 10)
    if done == total or done // every != (done - 1) // every:
        log.info("%s: %d/%d passes, %.1f s", name, done, total, time.perf_counter() - started)
