"""Decoding transforms (thesis §6.1): one implementation, used by the metrics and by the sampler.

Each transform maps next-byte log-probabilities (..., 256) to the log-probabilities of the
distribution a decoding method samples from; bytes it removes get -inf. Ties are broken by byte
order (the lower byte wins), so every transform is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

METHODS = ("pure", "greedy", "top_k", "top_p", "temperature")
METHOD_LABELS = {"pure": "Pure", "greedy": "Greedy", "top_k": "Top-K", "top_p": "Top-P", "temperature": "Temp."}


@dataclass(frozen=True)
class Decoding:
    """A decoding method and its parameter (`top_k` k, `top_p` p, `temperature` t)."""

    method: str
    top_k: int = 5
    top_p: float = 0.9
    temperature: float = 0.8

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown decoding method {self.method!r}; choose from {list(METHODS)}")

    def __call__(self, logprobs: torch.Tensor) -> torch.Tensor:
        return apply_decoding(logprobs, self)


def decodings_from_config(settings: Mapping) -> list[Decoding]:
    """The config's `decoding` section as one `Decoding` per listed method."""
    params = {key: settings[key] for key in ("top_k", "top_p", "temperature")}
    return [Decoding(method, **params) for method in settings["methods"]]


def greedy(logprobs: torch.Tensor) -> torch.Tensor:
    """All mass on the argmax (the first one on ties)."""
    out = torch.full_like(logprobs, float("-inf"))
    return out.scatter_(-1, logprobs.argmax(-1, keepdim=True), 0.0)


def top_k(logprobs: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k most probable bytes, renormalised."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    k = min(k, logprobs.size(-1))
    _, keep = _stable_sort_desc(logprobs)
    keep = keep[..., :k]
    mask = torch.zeros_like(logprobs, dtype=torch.bool).scatter_(-1, keep, True)
    return _renormalise(logprobs.masked_fill(~mask, float("-inf")))


def top_p(logprobs: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus sampling: keep the smallest set of most probable bytes whose mass reaches p, renormalised."""
    if not 0 < p <= 1:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    mask = nucleus_mask(logprobs.exp(), p)
    return _renormalise(logprobs.masked_fill(~mask, float("-inf")))


def temperature(logprobs: torch.Tensor, t: float) -> torch.Tensor:
    """Softmax of log p / t."""
    if t <= 0:
        raise ValueError(f"temperature must be > 0, got {t}")
    return torch.log_softmax(logprobs / t, dim=-1)


def apply_decoding(logprobs: torch.Tensor, decoding: Decoding) -> torch.Tensor:
    if decoding.method == "pure":
        return logprobs
    if decoding.method == "greedy":
        return greedy(logprobs)
    if decoding.method == "top_k":
        return top_k(logprobs, decoding.top_k)
    if decoding.method == "top_p":
        return top_p(logprobs, decoding.top_p)
    return temperature(logprobs, decoding.temperature)


def nucleus_mask(probs: torch.Tensor, tau: float) -> torch.Tensor:
    """The nucleus set as a boolean mask: the fewest most probable entries whose mass is >= tau.

    An entry is in the set iff the mass of the entries ranked before it is still below tau, so the
    entry that crosses tau is included (the arg min of thesis §4.1.1).
    """
    sorted_probs, order = _stable_sort_desc(probs)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    in_sorted = mass_before < tau
    in_sorted[..., 0] = True  # the most probable entry is always in the nucleus
    return torch.zeros_like(in_sorted).scatter_(-1, order, in_sorted)


def _stable_sort_desc(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.sort(values, dim=-1, descending=True, stable=True)


def _renormalise(logprobs: torch.Tensor) -> torch.Tensor:
    return logprobs - torch.logsumexp(logprobs, dim=-1, keepdim=True)
