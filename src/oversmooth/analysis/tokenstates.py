"""The token track's states (`tokenheads`): the frozen source LM's final hidden states h, what every head reads,
computed once per input: the evaluation prompts' window tokens and the first tokens of the training shard."""

from __future__ import annotations

import logging
import time

import numpy as np
import pyarrow as pa
import torch

from oversmooth.analysis.tokenheads import TokenTrackError

log = logging.getLogger(__name__)


def prompt_tokens(tokenizer, context: bytes, window: bytes) -> tuple[list[int], list[int]]:
    """Token ids of an evaluation prompt's context and of its window, tokenised apart so that the window's first
    token starts at its first byte (invalid UTF-8 decodes to U+FFFD)."""
    def encode(data: bytes) -> list[int]:
        return tokenizer(data.decode("utf-8", errors="replace"), add_special_tokens=False)["input_ids"]

    return encode(context), encode(window)


@torch.no_grad()
def prompt_states(model, tokenizer, prompts: pa.Table) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The state and target of every window token of every prompt, each predicted from the prompt's context tokens
    and the window's earlier tokens (one forward pass per prompt): (columns, states) as `read_states` returns."""
    device = next(model.parameters()).device
    columns: dict[str, list[np.ndarray]] = {"prompt_id": [], "position": [], "target": []}
    states = []
    started = time.perf_counter()
    for i, row in enumerate(prompts.select(["prompt_id", "context", "window"]).to_pylist()):
        context, window = prompt_tokens(tokenizer, row["context"], row["window"])
        if not context or not window:
            raise TokenTrackError(f"prompt {row['prompt_id']}: its context or window has no tokens")
        ids = torch.tensor([context + window[:-1]], device=device)
        hidden = model.base_model(input_ids=ids).last_hidden_state[0, len(context) - 1 :].float().cpu().numpy()
        states.append(hidden)
        columns["prompt_id"].append(np.full(len(window), row["prompt_id"], dtype=np.int32))
        columns["position"].append(np.arange(len(window), dtype=np.int32))
        columns["target"].append(np.asarray(window, dtype=np.int32))
        if (i + 1) % 10 == 0 or i + 1 == len(prompts):
            log.info("prompt states: %d/%d prompts, %.1f s", i + 1, len(prompts), time.perf_counter() - started)
    return {name: np.concatenate(parts) for name, parts in columns.items()}, np.concatenate(states)


def shard_token_ids(tokenizer, shard: np.ndarray, n_tokens: int) -> np.ndarray:
    """The first `n_tokens` token ids of a byte shard's text (read in growing prefixes; a last document cut
    mid-character decodes to U+FFFD)."""
    n_bytes = 8 * n_tokens
    while True:
        text = bytes(shard[:n_bytes]).decode("utf-8", errors="replace")
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > n_tokens or n_bytes >= len(shard):
            break
        n_bytes *= 2
    if len(ids) < n_tokens:
        raise TokenTrackError(f"tokens.fit_tokens: the training shard has {len(ids)} tokens, fewer than {n_tokens}")
    return np.asarray(ids[:n_tokens], dtype=np.int64)


def shard_states(model, tokenizer, shard: np.ndarray, n_tokens: int, block: int, batch_size: int):
    """States predicting the training shard's first `n_tokens` next tokens (rounded down to whole blocks), in blocks
    (`final_hidden_states`): (columns, states) as `read_states` returns, `prompt_id` being the block."""
    states, targets = final_hidden_states(model, shard_token_ids(tokenizer, shard, n_tokens + 1), block, batch_size)
    rows = np.arange(len(targets))
    return {"prompt_id": (rows // block).astype(np.int32), "position": (rows % block).astype(np.int32),
            "target": targets.astype(np.int32)}, states


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

