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
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import torch
import torch.nn.functional as F

from oversmooth.catalog import token_head_parts
from oversmooth.headfit import HeadTraining, LowRankHead, train_head
from oversmooth.io import ParquetInput, atomic_path, write_parquet
from oversmooth.logit_tables import SampledRows, sample_positions
from oversmooth.metrics import PositionChunk, oversmoothing
from oversmooth.rank import truncated_svd

log = logging.getLogger(__name__)


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


@torch.no_grad()
def head_loss(head, states: np.ndarray, targets: np.ndarray, batch_size: int = 1024) -> float:
    """Mean next-token cross-entropy (nats) of `head` (a module, or a W to multiply) on cached states."""
    total = 0.0
    for start in range(0, len(targets), batch_size):
        logits = _logits(head, torch.from_numpy(states[start : start + batch_size]))
        total += F.cross_entropy(logits, torch.from_numpy(targets[start : start + batch_size]), reduction="sum").item()
    return total / len(targets)


def save_head(head: LowRankHead, path: str | os.PathLike, meta: dict) -> None:
    """A rank-k head's factors with `meta` (kind, rank, source, ...), atomically."""
    with atomic_path(path) as tmp:
        torch.save({"meta": meta, "up": head.up.weight.detach().cpu(), "down": head.down.weight.detach().cpu()}, tmp)


def load_head(path: str | os.PathLike) -> tuple[LowRankHead, dict]:
    """(head, meta) saved by `save_head`."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    vocab, rank = saved["up"].shape
    head = LowRankHead(saved["down"].size(1), rank, vocab_size=vocab)
    with torch.no_grad():
        head.up.weight.copy_(saved["up"])
        head.down.weight.copy_(saved["down"])
    return head.eval(), saved["meta"]


@torch.no_grad()
def head_logprob_chunks(head, weight: torch.Tensor, columns: dict[str, np.ndarray], states: np.ndarray,
                        batch_size: int) -> Iterator[PositionChunk]:
    """Cached states (`read_states`) in chunks, with `head`'s and the full head `weight`'s log-probabilities over the
    whole vocabulary (float64, on CPU): what `metrics.write_position_metrics` compares."""
    head, weight = head.cpu(), weight.cpu()  # the metrics are a CPU job
    if states.shape[1] != weight.size(1):
        raise TokenTrackError(f"states of size {states.shape[1]}, but the head reads {weight.size(1)}")
    for start in range(0, len(states), batch_size):
        rows = slice(start, start + batch_size)
        h = torch.from_numpy(states[rows])
        yield PositionChunk(
            prompt_id=columns["prompt_id"][rows], position=columns["position"][rows], target=columns["target"][rows],
            logp_model=torch.log_softmax(_logits(head, h).double(), -1),
            logp_reference=torch.log_softmax((h @ weight.T).double(), -1),
        )


def oversmoothing_against_full(head, weight: torch.Tensor, states: np.ndarray, tau: float,
                               batch_size: int = 256) -> dict[str, np.ndarray]:
    """Per state: TTO, NSMD, TV, KL, KL_eps and entropy difference of `head`'s distribution against the full
    head's (the reference), over the whole vocabulary, in float64."""
    index = np.arange(len(states))
    parts: dict[str, list[np.ndarray]] = {}
    for chunk in head_logprob_chunks(head, weight, {"prompt_id": index, "position": index, "target": index}, states,
                                     batch_size):
        for name, value in oversmoothing(chunk.logp_model, chunk.logp_reference, tau).items():
            parts.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


@torch.no_grad()
def sampled_state_rows(head, states_path: str | os.PathLike, positions: int | str, seed: int) -> SampledRows:
    """A seeded sample of `positions` cached evaluation states (the same rows for every head), with `head`'s
    log-probabilities over the whole vocabulary (float64): TBAT's input."""
    columns, states = read_states(states_path)
    rows = sample_positions(len(states), positions, seed)
    logits = _logits(head.cpu(), torch.from_numpy(states[rows])).double()
    return SampledRows(columns["prompt_id"][rows], columns["position"][rows], torch.log_softmax(logits, -1).numpy())


def head_matrix(head: LowRankHead) -> np.ndarray:
    """The matrix (V x k, float64) that maps a rank-k head's input (its k-dimensional code B h) to the logits:
    TBAT's W."""
    return head.up.weight.detach().double().cpu().numpy()


def _logits(head, h: torch.Tensor) -> torch.Tensor:
    return h @ head.T if isinstance(head, torch.Tensor) else head(h)


def unargmaxable_token_table(records: list[dict], targets: np.ndarray, tokenizer, top_n: int = 12) -> pd.DataFrame:
    """Per head (a `argmax.vertex_record`): how many tokens can and cannot be the argmax, the share of the corpus
    tokens `targets` (the cached training text's next tokens) that can never be, and the most frequent of those
    tokens there, each with its count."""
    rows = []
    for record in records:
        counts = np.bincount(targets, minlength=record["n_rows"])
        never = np.asarray(record["unargmaxable"], dtype=np.int64)
        order = never[np.argsort(-counts[never], kind="stable")]
        frequent = [t for t in order[:top_n] if counts[t] > 0]
        kind, rank = token_head_parts(record["model"])
        rows.append({
            "model": record["model"], "kind": kind, "k": rank, "vocabulary": record["n_rows"],
            "n_argmaxable": len(record["argmaxable"]), "n_unargmaxable": len(never),
            "n_duplicated": len(record["duplicates"]), "n_failed": len(record["failed"]),
            "corpus_tokens": int(counts.sum()), "corpus_share_never_argmax": float(counts[never].sum() / counts.sum()),
            "most_frequent_never_argmax": " ".join(f"{tokenizer.decode([int(t)])!r}×{counts[t]}" for t in frequent),
        })  # the time stays in the record: a table holds only what the same config reproduces
    return pd.DataFrame(rows)
