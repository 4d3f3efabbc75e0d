"""A text's log-loss under the truth: on a teacher's language, each sample scored by the teacher given
the whole document before it (rule quality's `truth_bits_per_byte`). Apart from `teacher`, so that the quality jobs
reach only the model they load, not the sampler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from oversmooth.models.bytelm import ByteLM


class TruthError(ValueError):
    """A text the truth cannot score whole; the message names the pair and the setting."""


@torch.no_grad()
def continuation_bits(
    lm: ByteLM, contexts: Sequence[bytes], continuations: Sequence[bytes], batch_size: int = 16
) -> np.ndarray:
    """Per pair, the continuation's log-loss under the byte LM `lm` given its context, in bits per byte (NaN for an
    empty one): under a teacher, with the whole document before it as context, its log-loss under the truth. Each
    context plus continuation must fit in the model's block, so that every byte is scored given everything before
    it. A model that needs outputs only from a position on (the byte-marginalised token LM) computes no others."""
    if not all(contexts):
        raise TruthError("an empty context: the first byte of its continuation has nothing to be predicted from")
    texts = [context + continuation for context, continuation in zip(contexts, continuations)]
    block = lm.block_size
    too_long = [i for i, text in enumerate(texts) if len(text) - 1 > block]
    if too_long:
        first = too_long[0]
        raise TruthError(f"{len(too_long)} texts (the first: pair {first}, {len(texts[first])} bytes) do not fit in "
                         f"the truth's block of {block}: lower sampling.continuation_bytes or prompt_bytes")
    bits = np.full(len(texts), np.nan)
    for first in range(0, len(texts), batch_size):
        rows = range(first, min(first + batch_size, len(texts)))
        width = max(len(texts[i]) for i in rows) - 1
        if width < 1:
            continue
        x = torch.zeros((len(rows), width), dtype=torch.long)
        for j, i in enumerate(rows):  # right-padded: causal models keep the padding out of every real position
            x[j, : len(texts[i]) - 1] = torch.tensor(list(texts[i][:-1]))
        outputs_from = [len(contexts[i]) - 1 for i in rows]
        logprobs = lm.next_byte_outputs(x, outputs_from).logprobs.double().cpu()
        for j, i in enumerate(rows):
            start, end = len(contexts[i]), len(texts[i])
            if end > start:
                targets = torch.tensor(list(texts[i][start:end]))
                nats = -logprobs[j, start - 1 : end - 1].gather(-1, targets[:, None]).sum().item()
                bits[i] = nats / np.log(2) / (end - start)
    return bits
