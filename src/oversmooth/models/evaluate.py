"""Held-out loss and argmax accuracy of any ByteLM (thesis Table 3.1)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from oversmooth.core.io import ParquetInput
from oversmooth.core.logs import get_logger
from oversmooth.data.prompts import SpellableText
from oversmooth.models.bytelm import ByteLM
from oversmooth.models.model import sample_windows, windows_at

log = get_logger("evaluate")


def heldout_pool(eval_docs_path: str | os.PathLike, max_bytes: int, separator: bytes = b"\n\n",
                 unspellable: Sequence[int] = ()) -> tuple[np.ndarray, np.ndarray]:
    """The first `max_bytes` of the evaluation pool's documents that hold none of the `unspellable` bytes, joined
    by `separator`, as uint8, and where each document lies in them: (start, length) rows, int64 (the last one's
    length cut where the pool is)."""
    spellable = SpellableText(unspellable)
    chunks, documents, total = [], [], 0
    for batch in ParquetInput(eval_docs_path).iter_batches(columns=["text"], batch_size=64):
        for text in batch.column(0).to_pylist():
            if not spellable.accepts(text):
                continue
            chunks.append(text + separator)
            documents.append((total, min(len(text), max_bytes - total)))
            total += len(text) + len(separator)
            if total >= max_bytes:
                break
        else:
            continue
        break
    spellable.report("held-out pool")
    data = np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)
    return data, np.array(documents, dtype=np.int64).reshape(-1, 2)


def heldout_bytes(eval_docs_path: str | os.PathLike, max_bytes: int, separator: bytes = b"\n\n",
                  unspellable: Sequence[int] = ()) -> np.ndarray:
    """The held-out pool's bytes (`heldout_pool`)."""
    return heldout_pool(eval_docs_path, max_bytes, separator, unspellable)[0]


def document_starts(documents: np.ndarray, block: int) -> np.ndarray:
    """The start of every document (`heldout_pool`'s rows) at least `block + 1` bytes long: a window of `block`
    inputs and their next bytes from its first byte lies inside it."""
    return documents[documents[:, 1] > block, 0]


@torch.no_grad()
def heldout_metrics(lm: ByteLM, data: np.ndarray, *, windows: int, block: int, batch_size: int, seed: int,
                    starts: np.ndarray | None = None) -> dict:
    """Mean next-byte cross-entropy (nats) and argmax accuracy (%) over `windows` seeded windows of `data`:
    anywhere in it, or, given `starts` (`document_starts`), each from the first byte of a document drawn among
    them, so that the model reads every document from its start (on a teacher's text, as the teacher wrote it)."""
    if block > lm.block_size:
        raise ValueError(f"evaluation.block ({block}) exceeds {lm.name}'s block size ({lm.block_size})")
    rng = np.random.default_rng(seed)
    if starts is not None:
        if len(starts) < windows:
            raise ValueError(f"evaluation.windows ({windows}) exceeds the {len(starts)} held-out documents of at "
                             f"least evaluation.block + 1 = {block + 1} bytes (evaluation.from_document_start)")
        starts = rng.choice(starts, size=windows, replace=False)
    canonical_nats = getattr(lm, "canonical_nats", None)  # a token-level LM's own tokenisation, for comparison
    total_loss, token_level, correct, count = 0.0, 0.0, 0, 0
    for first in range(0, windows, batch_size):
        n = min(batch_size, windows - first)
        if starts is None:
            x, y = sample_windows(data, rng, n, block)
        else:
            x, y = windows_at(data, starts[first:first + n], block)
        logprobs = lm.next_byte_logprobs(x).cpu()
        total_loss += -logprobs.gather(-1, y.unsqueeze(-1)).sum().item()
        correct += (logprobs.argmax(-1) == y).sum().item()
        count += y.numel()
        if canonical_nats is not None:
            token_level += canonical_nats([bytes(row) for row in torch.cat([x, y[:, -1:]], dim=1).to(torch.uint8).tolist()])
        log.info("%s: %d/%d windows", lm.name, min(first + batch_size, windows), windows)
    result = {"model": lm.name, "heldout_loss": total_loss / count, "accuracy_pct": 100.0 * correct / count, "bytes": count}
    if canonical_nats is not None:
        result["token_level_loss"] = token_level / count
    log.info("%s: held-out loss %.4f, accuracy %.2f%% over %d bytes", lm.name, result["heldout_loss"], result["accuracy_pct"], count)
    return result
