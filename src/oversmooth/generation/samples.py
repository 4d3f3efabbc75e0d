"""The sample jobs' side of sampling (thesis ch. 5, §6.2): every model continues every prompt's `sample_prefix` (on
a teacher's language after its document before it, the context the truth scores the continuation in) for
`continuation_bytes` bytes with each decoding method, batched over prompts, to Parquet. Each row's uniforms come from
its own generator, seeded by (seed, model, method, prompt): adding a model or a prompt changes no other sample, and
the batch size changes nothing.

The token track samples the same way (`sample_token_model`): a rank-k head (or the full one) on a frozen
`transformers` LM's states with that model's cache, token prefixes of equal length, texts decoded by its tokenizer.
Its BAT-sampling methods run in jobs of their own (their solver on a CPU) whose rows a job of its own joins to the
others' (`sampletable.join_samples`): the same rows as one job sampling every method. The steppers and the draw are
`generation.sampling`'s."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import torch

from oversmooth.analysis.decoding import Decoding
from oversmooth.core.io import write_parquet
from oversmooth.core.logs import get_logger
from oversmooth.generation.sampletable import SAMPLES_SCHEMA
from oversmooth.generation.sampling import Stepper, TokenHeadStepper, generate, stepper_for, uniforms_for
from oversmooth.models.bytelm import ByteLM, GPTByteLM

log = get_logger("sampling")

def sample_seed(seed: int, model: str, method: str, prompt_id: int) -> int:
    """A 63-bit seed that depends only on (seed, model, method, prompt)."""
    digest = hashlib.blake2b(f"{seed}/{model}/{method}/{prompt_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sample_model(
    lm: ByteLM,
    prompts: pa.Table,
    decodings: Sequence[Decoding],
    out_path: str | os.PathLike,
    *,
    continuation_bytes: int,
    batch_size: int,
    seed: int,
    n_prompts: int | None = None,
    document_context: bool = False,
) -> pa.Table:
    """Every (method, prompt) continuation of one byte-level model, to Parquet. `document_context`: the model
    continues each prompt's `context` (its document before the prefix) and `sample_prefix`, as a teacher's truth
    scores the continuation; else the prefix alone."""
    prefixes = [list(p) for p in prompts.column("sample_prefix").to_pylist()[:n_prompts]]
    ids = prompts.column("prompt_id").to_pylist()[:n_prompts]
    contexts = [list(c) for c in prompts.column("context").to_pylist()[:n_prompts]] if document_context else None
    return write_samples(stepper_for(lm), lm.name, ids, prefixes, decodings, out_path, n_new=continuation_bytes,
                         batch_size=batch_size, seed=seed, to_bytes=bytes, contexts=contexts)


def sample_token_model(
    model,
    tokenizer,
    head: torch.nn.Module,
    name: str,
    prompts: pa.Table,
    decodings: Sequence[Decoding],
    out_path: str | os.PathLike | None,
    *,
    continuation_tokens: int,
    batch_size: int,
    seed: int,
) -> pa.Table:
    """Every (method, prompt) continuation of a token-track model (`head` on the frozen `model`'s states) from the
    token prompts' `prefix_ids`, to Parquet (`out_path`, unless None); texts are the sampled tokens decoded, as the
    human ones are."""
    stepper = TokenHeadStepper(model, head, getattr(model.config, "max_position_embeddings", 2048))
    return write_samples(
        stepper, name, prompts.column("prompt_id").to_pylist(), prompts.column("prefix_ids").to_pylist(), decodings,
        out_path, n_new=continuation_tokens, batch_size=batch_size, seed=seed,
        to_bytes=lambda ids: tokenizer.decode(ids).encode("utf-8"),
    )


def byte_head_matrix(lm: ByteLM) -> np.ndarray | None:
    """W (256 x k, float64) of a GPT byte model whose head is one softmax of a matrix (BAT sampling's); None for the
    others (a Mixture of Softmaxes, a `transformers` model, the token marginal)."""
    if isinstance(lm, GPTByteLM) and lm.model.config.mos_components == 1:
        return lm.model.output_matrix().detach().double().cpu().numpy()
    return None


def write_samples(
    stepper: Stepper,
    name: str,
    ids: Sequence[int],
    prefixes: Sequence[Sequence[int]],
    decodings: Sequence[Decoding],
    out_path: str | os.PathLike | None,
    *,
    n_new: int,
    batch_size: int,
    seed: int,
    to_bytes: Callable[[Sequence[int]], bytes],
    contexts: Sequence[Sequence[int]] | None = None,
) -> pa.Table:
    """Continue each prefix (equal lengths, bytes or token ids), after its context where `contexts` are given, by
    `n_new` symbols with each decoding method, in batches of inputs of one length; one row per (method, prompt) in
    the prompts' order, with the prefix and continuation as `to_bytes` renders them; to Parquet unless `out_path`
    is None."""
    if len({len(p) for p in prefixes}) != 1:
        raise ValueError(f"{name}: the sampling prefixes have different lengths {sorted({len(p) for p in prefixes})}; "
                         "rebuild the prompts")
    inputs = [[*c, *p] for c, p in zip(contexts, prefixes, strict=True)] if contexts is not None else prefixes
    batches = equal_length_batches(inputs, batch_size)
    rows = []
    for decoding in decodings:
        started, done, by_prompt = time.perf_counter(), 0, {}
        if hasattr(decoding, "sampler"):  # BAT sampling: its counts are this method's
            decoding.sampler.restart()
        for batch in batches:
            seeds = [sample_seed(seed, name, decoding.method, ids[j]) for j in batch]
            x = torch.tensor([inputs[j] for j in batch], dtype=torch.long)
            new = generate(stepper, x, decoding, uniforms_for(seeds, n_new))
            for j, s, continuation in zip(batch, seeds, new.tolist()):
                data = to_bytes(continuation)
                by_prompt[j] = {"model": name, "method": decoding.method, "prompt_id": ids[j], "seed": s,
                                "prefix": to_bytes(prefixes[j]), "continuation": data,
                                "text": data.decode("utf-8", errors="replace")}
            done += len(batch)
            log.info("%s %s: %d/%d continuations, %.1f s", name, decoding.method, done, len(ids),
                     time.perf_counter() - started)
        rows += [by_prompt[j] for j in range(len(ids))]
        seconds = time.perf_counter() - started
        if hasattr(decoding, "sampler"):
            log.info("%s %s: %s", name, decoding.method, decoding.sampler.restart().line(seconds))
        log.info("%s %s: %d continuations of %d symbols, %.1f s (%.0f symbols/s)", name, decoding.method, len(ids),
                 n_new, seconds, len(ids) * n_new / seconds)
    table = pa.Table.from_pylist(rows, schema=SAMPLES_SCHEMA)
    if out_path is not None:
        write_parquet(table, out_path)
    return table


def equal_length_batches(inputs: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """The indices of `inputs` in batches of at most `batch_size`, each of inputs of one length (lengths in order of
    first appearance, indices in order within a length)."""
    by_length: dict[int, list[int]] = {}
    for j, x in enumerate(inputs):
        by_length.setdefault(len(x), []).append(j)
    return [group[k : k + batch_size] for group in by_length.values() for k in range(0, len(group), batch_size)]
