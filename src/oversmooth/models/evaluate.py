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
from oversmooth.models.model import sample_windows

log = get_logger("evaluate")


def heldout_bytes(eval_docs_path: str | os.PathLike, max_bytes: int, separator: bytes = b"\n\n",
                  unspellable: Sequence[int] = ()) -> np.ndarray:
    """The first `max_bytes` of the evaluation pool's documents that hold none of the `unspellable` bytes, joined
    by `separator`, as uint8."""
    spellable = SpellableText(unspellable)
    chunks, total = [], 0
    for batch in ParquetInput(eval_docs_path).iter_batches(columns=["text"], batch_size=64):
        for text in batch.column(0).to_pylist():
            if not spellable.accepts(text):
                continue
            chunks.append(text + separator)
            total += len(text) + len(separator)
            if total >= max_bytes:
                spellable.report("held-out pool")
                return np.frombuffer(b"".join(chunks)[:max_bytes], dtype=np.uint8)
    spellable.report("held-out pool")
    return np.frombuffer(b"".join(chunks), dtype=np.uint8)


@torch.no_grad()
def heldout_metrics(lm: ByteLM, data: np.ndarray, *, windows: int, block: int, batch_size: int, seed: int) -> dict:
    """Mean next-byte cross-entropy (nats) and argmax accuracy (%) over `windows` seeded windows."""
    if block > lm.block_size:
        raise ValueError(f"evaluation.block ({block}) exceeds {lm.name}'s block size ({lm.block_size})")
    rng = np.random.default_rng(seed)
    canonical_nats = getattr(lm, "canonical_nats", None)  # a token-level LM's own tokenisation, for comparison
    total_loss, token_level, correct, count = 0.0, 0.0, 0, 0
    for first in range(0, windows, batch_size):
        x, y = sample_windows(data, rng, min(batch_size, windows - first), block)
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
