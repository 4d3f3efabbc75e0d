"""Decoding transforms (thesis §6.1, and the truncation samplers of its §2.3): one implementation, used by the metrics
and by the sampler.

Each transform maps next-byte log-probabilities (..., V) to the log-probabilities of the distribution a decoding
method samples from; bytes it removes get -inf. Greedy, top-k and top-p break ties by byte order (the lower byte
wins); epsilon, eta, min-p and typical cut at a value and keep every entry tied at it, as transformers' warpers do;
every transform is deterministic. They are NumPy (float64 in the pipeline), so that the CPU analysis jobs (metrics,
TBAT) run without torch; the sampler hands them its (B, V) rows once per step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

METHODS = ("pure", "greedy", "top_k", "top_p", "temperature", "epsilon", "eta", "typical", "min_p", "ba_epsilon",
           "ba_eta")
HEAD_METHODS = ("ba_epsilon", "ba_eta")  # decided with the model's head matrix (oversmooth.analysis.bat.sampler)
# Each method's parameter, by its key in the config's `decoding` section (pure and greedy have none); BAT sampling's
# two forms take epsilon's and eta's.
PARAMETER = {"top_k": "top_k", "top_p": "top_p", "temperature": "temperature", "epsilon": "epsilon", "eta": "eta",
             "typical": "typical_p", "min_p": "min_p", "ba_epsilon": "epsilon", "ba_eta": "eta"}


@dataclass(frozen=True)
class Decoding:
    """A decoding method and its parameter (`top_k` k, `top_p` p, `temperature` t, `epsilon` and `eta` the thresholds
    of epsilon- and eta-sampling, `typical_p` the mass of locally typical sampling, `min_p` min-p's scale); the
    defaults are the papers' (the config schema)."""

    method: str
    top_k: int = 5
    top_p: float = 0.9
    temperature: float = 0.8
    epsilon: float = 3e-4
    eta: float = 3e-4
    typical_p: float = 0.95
    min_p: float = 0.1

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown decoding method {self.method!r}; choose from {list(METHODS)}")

    def __call__(self, logprobs: np.ndarray) -> np.ndarray:
        return apply_decoding(logprobs, self)


def decodings_from_config(settings: Mapping) -> list[Decoding]:
    """The config's `decoding` section (or `decoding_settings` of it) as one `Decoding` per listed method."""
    return [Decoding(method, **({PARAMETER[method]: settings[PARAMETER[method]]} if method in PARAMETER else {}))
            for method in settings["methods"]]


def decoding_settings(settings: Mapping, methods: list[str] | None = None) -> dict:
    """`methods` (default: the section's own) with the parameters of those methods alone: what a job's result
    depends on, so that a setting of a method the job does not run reruns nothing."""
    methods = list(settings["methods"] if methods is None else methods)
    return {"methods": methods, **{PARAMETER[m]: settings[PARAMETER[m]] for m in methods if m in PARAMETER}}


def greedy(logprobs: np.ndarray) -> np.ndarray:
    """All mass on the argmax (the first one on ties)."""
    out = np.full_like(logprobs, -np.inf)
    np.put_along_axis(out, logprobs.argmax(-1)[..., None], 0.0, axis=-1)
    return out


def top_k(logprobs: np.ndarray, k: int) -> np.ndarray:
    """Keep the k most probable entries (on ties, the first ones), renormalised."""
    if k < 1:
        raise ValueError(f"top-k needs k >= 1, got {k}")
    k = min(k, logprobs.shape[-1])
    kth = -np.partition(-logprobs, k - 1, axis=-1)[..., k - 1 : k]  # the k-th largest value
    return _renormalise(np.where(_first_ranked(logprobs, kth, k), logprobs, -np.inf))


def _first_ranked(values: np.ndarray, cut: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """The first `count` entries of each row in a stable descending order, given the value `cut` of the last one:
    every entry above it, then the entries equal to it in index order (what a stable sort would keep), in O(V)."""
    rows = values.reshape(-1, values.shape[-1])
    cut = np.reshape(cut, (-1, 1))
    above, at = rows > cut, rows == cut
    wanted = np.reshape(count, (-1, 1)) - above.sum(-1, keepdims=True)
    tie_rank = np.cumsum(at, axis=-1) - 1  # each tie's position among its row's ties, in index order
    return (above | (at & (tie_rank < wanted))).reshape(values.shape)


def top_p(logprobs: np.ndarray, p: float) -> np.ndarray:
    """Nucleus sampling: keep the smallest set of most probable bytes whose mass reaches p, renormalised."""
    if not 0 < p <= 1:
        raise ValueError(f"top-p needs 0 < p <= 1, got {p}")
    mask = nucleus_mask(np.exp(logprobs), p)
    return _renormalise(np.where(mask, logprobs, -np.inf))


def temperature(logprobs: np.ndarray, t: float) -> np.ndarray:
    """Softmax of log p / t."""
    if t <= 0:
        raise ValueError(f"temperature must be > 0, got {t}")
    scaled = logprobs / t
    shifted = scaled - scaled.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def epsilon_sampling(logprobs: np.ndarray, epsilon: float) -> np.ndarray:
    """Hewitt et al. (2022)'s epsilon-sampling: keep the entries of probability >= epsilon (the paper writes >, the
    transformers warper keeps >=; they differ only at equality), the most probable always with every one tied with
    it, renormalised. Ties cannot split: the cut is a value."""
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon-sampling needs 0 <= epsilon < 1, got {epsilon}")
    return _keep_from(logprobs, np.float64(epsilon))


def eta_sampling(logprobs: np.ndarray, eta: float) -> np.ndarray:
    """Hewitt et al. (2022)'s eta-sampling: epsilon-sampling at min(eta, sqrt(eta) exp(-H(p))), H in nats."""
    if not 0 <= eta < 1:
        raise ValueError(f"eta-sampling needs 0 <= eta < 1, got {eta}")
    return _keep_from(logprobs, np.minimum(eta, np.sqrt(eta) * np.exp(-entropy(logprobs)[..., None])))


def min_p_sampling(logprobs: np.ndarray, min_p: float) -> np.ndarray:
    """Nguyen et al. (2024)'s min-p: keep the entries of probability >= min_p times the largest, renormalised."""
    if not 0 <= min_p <= 1:
        raise ValueError(f"min-p needs 0 <= min_p <= 1, got {min_p}")
    return _keep_from(logprobs, min_p * np.exp(logprobs.max(-1, keepdims=True)))


def typical(logprobs: np.ndarray, mass: float) -> np.ndarray:
    """Meister et al. (2023)'s locally typical sampling: the entries ordered by |-log p - H(p)| (the most typical
    first), the fewest whose mass reaches `mass`, with every entry tied at the cut (as transformers' warper keeps
    them: the cut is a value, so ties cannot split), renormalised."""
    if not 0 < mass <= 1:
        raise ValueError(f"typical sampling needs 0 < mass <= 1, got {mass}")
    with np.errstate(invalid="ignore"):
        shifted = np.abs(-logprobs - entropy(logprobs)[..., None])  # inf where p = 0
    order = np.argsort(shifted, axis=-1, kind="stable")
    in_order = np.take_along_axis(shifted, order, axis=-1)
    mass_so_far = np.cumsum(np.take_along_axis(np.exp(logprobs), order, axis=-1), axis=-1)
    last = np.minimum((mass_so_far < mass).sum(-1, keepdims=True), logprobs.shape[-1] - 1)
    return _renormalise(np.where(shifted <= np.take_along_axis(in_order, last, axis=-1), logprobs, -np.inf))


def entropy(logprobs: np.ndarray, probs: np.ndarray | None = None) -> np.ndarray:
    """Shannon entropy in nats along the last axis, with 0 log 0 = 0 (`probs`: exp(logprobs), if at hand)."""
    probs = np.exp(logprobs) if probs is None else probs
    with np.errstate(invalid="ignore"):  # 0 * -inf, left out by the mask
        return -np.where(logprobs > -np.inf, probs * logprobs, 0.0).sum(-1)


def _keep_from(logprobs: np.ndarray, threshold: np.ndarray) -> np.ndarray:
    """The entries of probability >= `threshold` and those tied with the most probable, renormalised."""
    keep = (np.exp(logprobs) >= threshold) | (logprobs == logprobs.max(-1, keepdims=True))
    return _renormalise(np.where(keep, logprobs, -np.inf))


TRANSFORMS = {
    "pure": lambda logprobs, d: logprobs,
    "greedy": lambda logprobs, d: greedy(logprobs),
    "top_k": lambda logprobs, d: top_k(logprobs, d.top_k),
    "top_p": lambda logprobs, d: top_p(logprobs, d.top_p),
    "temperature": lambda logprobs, d: temperature(logprobs, d.temperature),
    "epsilon": lambda logprobs, d: epsilon_sampling(logprobs, d.epsilon),
    "eta": lambda logprobs, d: eta_sampling(logprobs, d.eta),
    "typical": lambda logprobs, d: typical(logprobs, d.typical_p),
    "min_p": lambda logprobs, d: min_p_sampling(logprobs, d.min_p),
}  # BAT sampling (ba_epsilon, ba_eta) needs the model's head: oversmooth.analysis.bat.sampler.BATDecoding


def apply_decoding(logprobs: np.ndarray, decoding: Decoding) -> np.ndarray:
    if decoding.method not in TRANSFORMS:
        raise ValueError(f"{decoding.method} decides tokens with the model's head matrix, which a transform of "
                         "log-probabilities does not have: bind it to the head (oversmooth.analysis.bat.sampler."
                         "bat_decodings)")
    return TRANSFORMS[decoding.method](logprobs, decoding)



def nucleus_mask(probs: np.ndarray, tau: float) -> np.ndarray:
    """The nucleus set as a boolean mask: the fewest most probable entries whose mass is >= tau.

    An entry is in the set iff the mass of the entries ranked before it (ties in index order) is still below tau,
    so the entry that crosses tau is included (the arg min of thesis §4.1.1). Only the sorted values are needed
    (equal values are interchangeable in the cumulative mass), then ties at the cut go by index.
    """
    rows = probs.reshape(-1, probs.shape[-1])
    size, cut = _nucleus_cut(rows, tau, min(NUCLEUS_CANDIDATES, rows.shape[-1]))
    wide = size[:, 0] == NUCLEUS_CANDIDATES  # the cut may lie beyond the candidates: these rows are sorted whole
    if wide.any():
        size[wide], cut[wide] = _nucleus_cut(rows[wide], tau, rows.shape[-1])
    return _first_ranked(rows, cut, size).reshape(probs.shape)


NUCLEUS_CANDIDATES = 512  # the largest values taken first (a partition); a nucleus as large or larger sorts its row whole


def _nucleus_cut(rows: np.ndarray, tau: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(size, value at the cut) of each row's nucleus among its `n` largest values, in descending order (the
    cumulative mass of the first n sorted values does not depend on the rest); a size of n means the cut may lie
    beyond them."""
    largest = np.partition(rows, rows.shape[-1] - n, axis=-1)[:, -n:] if n < rows.shape[-1] else rows
    descending = np.sort(largest, axis=-1)[:, ::-1]
    mass_before = np.cumsum(descending, axis=-1) - descending
    size = np.maximum((mass_before < tau).sum(-1, keepdims=True), 1)
    return size, np.take_along_axis(descending, size - 1, axis=-1)


def _renormalise(logprobs: np.ndarray) -> np.ndarray:
    """log p - log sum p over each row (entries at -inf stay there)."""
    top = logprobs.max(-1, keepdims=True)
    return logprobs - (top + np.log(np.exp(logprobs - top).sum(-1, keepdims=True)))
