"""Oversmoothing of a token-track head against its source's full head, over the whole vocabulary, from cached
states: the token track's counterpart of two logits files (apart from `tokenheads`, so that the jobs that load or
sample a head do not run the metrics' code)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from oversmooth.analysis.metrics import PositionChunk, oversmoothing
from oversmooth.analysis.tokenheads import TokenTrackError, head_logits


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
            logp_model=torch.log_softmax(head_logits(head, h).double(), -1).numpy(),
            logp_reference=torch.log_softmax((h @ weight.T).double(), -1).numpy(),
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
            parts.setdefault(name, []).append(value)
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}

