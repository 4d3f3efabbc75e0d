"""Decoding transforms (thesis §6.1): one implementation, used by the metrics and by the sampler.

Each transform maps next-byte log-probabilities (..., 256) to the log-probabilities of the
distribution a decoding method samples from; bytes it removes get -inf. Ties are broken by byte
order (the lower byte wins), so every transform is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch

METHODS = ("pure", "greedy", "top_k", "top_p", "temperature")


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
    """Keep the k most probable entries (on ties, the first ones), renormalised."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    k = min(k, logprobs.size(-1))
    kth = logprobs.topk(k, dim=-1).values[..., -1:]
    return _renormalise(logprobs.masked_fill(~_first_ranked(logprobs, kth, k), float("-inf")))


def _first_ranked(values: torch.Tensor, cut: torch.Tensor, count: torch.Tensor | int) -> torch.Tensor:
    """The first `count` entries of each row in a stable descending order, given the value `cut` of the last one:
    every entry above it, then the entries equal to it in index order (what a stable sort would keep), in O(V)."""
    rows = values.reshape(-1, values.size(-1))
    above, at = rows > cut.reshape(-1, 1), rows == cut.reshape(-1, 1)
    wanted = (torch.as_tensor(count).reshape(-1, 1) - above.sum(-1, keepdim=True)).expand(rows.size(0), 1)
    row, column = at.nonzero(as_tuple=True)  # row-major: each row's ties in index order
    rank = torch.arange(len(row), device=row.device) - torch.searchsorted(row, row)  # position among its row's ties
    keep = rank < wanted[row, 0]
    above[row[keep], column[keep]] = True
    return above.reshape(values.shape)


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

    An entry is in the set iff the mass of the entries ranked before it (ties in index order) is still below tau,
    so the entry that crosses tau is included (the arg min of thesis §4.1.1). Only the sorted values are needed
    (equal values are interchangeable in the cumulative mass), then ties at the cut go by index.
    """
    rows = probs.reshape(-1, probs.size(-1))
    size, cut = _nucleus_cut(rows, tau, min(NUCLEUS_CANDIDATES, rows.size(-1)))
    wide = size[:, 0] == NUCLEUS_CANDIDATES  # the cut may lie beyond the candidates: these rows are sorted whole
    if wide.any():
        size[wide], cut[wide] = _nucleus_cut(rows[wide], tau, rows.size(-1))
    return _first_ranked(rows, cut, size).reshape(probs.shape)


NUCLEUS_CANDIDATES = 512  # the largest values taken first (`topk`); a nucleus as large or larger sorts its row whole


def _nucleus_cut(rows: torch.Tensor, tau: float, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(size, value at the cut) of each row's nucleus among its `n` largest values, in descending order (the
    cumulative mass of the first n sorted values does not depend on the rest); a size of n means the cut may lie
    beyond them."""
    descending = rows.topk(n, dim=-1).values if n < rows.size(-1) else _sorted_values_desc(rows)
    mass_before = torch.cumsum(descending, dim=-1) - descending
    size = (mass_before < tau).sum(-1, keepdim=True).clamp_min(1)
    return size, descending.gather(-1, size - 1)


def _sorted_values_desc(values: torch.Tensor) -> torch.Tensor:
    """Each row's values in descending order; on CPU by NumPy's vectorised sort (several times torch.sort's speed
    over a 49,152-token vocabulary, which decides the token track's metrics time)."""
    if values.device.type != "cpu":
        return torch.sort(values, dim=-1, descending=True).values
    return torch.from_numpy(np.flip(np.sort(values.detach().numpy(), axis=-1), -1).copy())


def _renormalise(logprobs: torch.Tensor) -> torch.Tensor:
    return logprobs - torch.logsumexp(logprobs, dim=-1, keepdim=True)
