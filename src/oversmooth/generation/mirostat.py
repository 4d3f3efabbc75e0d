"""Mirostat (Basu et al., ICLR 2021, Algorithm 1; the thesis's ref. [28]): top-k sampling whose k follows the
sample's own surprise, so that the mean surprise of the drawn symbols approaches a target tau.

Each row of a batch keeps its own maximal surprise mu, 2 tau at the start of every generation (`Mirostat.restart`).
At each step, for each row (the model's probabilities p_1 >= p_2 >= ... in descending order, V of them):

- s_hat, the Zipf exponent of the top m = min(m, V) probabilities by least squares through the origin:
  s_hat = sum_i t_i b_i / sum_i t_i^2 over i = 1..m-1, with t_i = ln((i+1)/i) and b_i = ln(p_i / p_{i+1});
- k = (eps 2^mu / (1 - V^-eps))^(1 / s_hat), eps = s_hat - 1 (their equation for the k of top-k whose surprise is
  mu under Zipf's law with exponent s_hat over V symbols);
- the symbol is drawn from the top k, renormalised (`sampling.draw`, as for every other method);
- mu <- mu - lr (S - tau), S = -log2 p(drawn symbol) under the model's own distribution (before truncation), in
  bits (`Mirostat.observe`).

Where the paper is loose, the choices made here:

- k's rounding: the authors' code's, round(k) + 1 (round half to even, as Python's `round`), then clipped to
  [1, V]; k is computed in logs, so a k beyond V (s_hat near 0) is V, not an overflow.
- eps = 0 (s_hat = 1): the limit of eps / (1 - V^-eps), 1 / ln V.
- zeros among the top m (a decoded truth): the pairs whose p_{i+1} is 0 are left out of s_hat's sums; a row with
  fewer than two nonzero probabilities has no s_hat and k = 1 (every k draws its one symbol). s_hat = 0 (the top
  m all equal) gives k = V where 2^mu > V - 1, else 1, the limits of the formula.
- ties: the top k are the k most probable symbols, ties broken by symbol order (the lower id wins), as
  `oversmooth.analysis.decoding.top_k` breaks them;
- the draw inverts the CDF of the top-k distribution at the row's uniform exactly as `sampling.draw` does for every
  other method: it is `sampling.draw`'s own inversion of the distribution `Mirostat(rows)` gives, and its two hooks
  are that `sampling.draw` calls `observe` after the draw and `sampling.generate` calls `restart` before a
  generation. So the samples are seeded by (seed, model, method, prompt) and a row's symbols depend on its own
  uniforms alone, whatever the batch;
- surprise in bits under the model's untruncated distribution, as the authors' code computes it (some later
  implementations, e.g. llama.cpp's, use the truncated one).

Mirostat is the sampler's only: its distribution at a position depends on the sample's own past surprise, so there is
no decoded distribution at the teacher-forced evaluation positions for the metrics to compare with a ground truth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from oversmooth.analysis.decoding import Decoding, decoding_settings, decodings_from_config

MIROSTAT = "mirostat"
SAMPLER_METHODS = (MIROSTAT,)  # decoding.sampler_methods: sampled, never measured by the metrics
LN2 = np.log(2.0)


def zipf_exponent(logprobs: np.ndarray, m: int) -> np.ndarray:
    """s_hat of each row of `logprobs` (B, V) from its top min(m, V) probabilities (the module's docstring); NaN
    where fewer than two are nonzero."""
    m = min(m, logprobs.shape[-1])
    top = -np.sort(-np.partition(logprobs, logprobs.shape[-1] - m, axis=-1)[:, -m:], axis=-1)  # descending
    t = np.log(np.arange(2, m + 1) / np.arange(1, m))
    finite = np.isfinite(top[:, 1:])  # pairs with p_{i+1} > 0
    b = np.where(finite, top[:, :-1] - np.where(finite, top[:, 1:], 0.0), 0.0)
    weights = np.where(finite, t * t, 0.0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weights > 0, (t * b).sum(-1) / weights, np.nan)


def top_k_size(s_hat: np.ndarray, mu: np.ndarray, vocab: int) -> np.ndarray:
    """k of each row (int64, 1..vocab) from s_hat, mu (bits) and the vocabulary size (the module's docstring)."""
    eps = s_hat - 1.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ratio = np.where(eps == 0, 1.0 / np.log(vocab), eps / -np.expm1(-eps * np.log(vocab)))
        log_k = (mu * LN2 + np.log(ratio)) / s_hat
    log_k = np.where(np.isnan(log_k), -np.inf, np.minimum(log_k, np.log(vocab) + 1.0))
    return np.clip(np.rint(np.exp(log_k)) + 1, 1, vocab).astype(np.int64)


def top_k_rows(logprobs: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Each row's k[row] most probable entries (ties: the lower index first), renormalised; -inf elsewhere."""
    order = np.argsort(-logprobs, axis=-1, kind="stable")
    keep = np.zeros(logprobs.shape, dtype=bool)
    np.put_along_axis(keep, order, np.arange(logprobs.shape[-1]) < k[:, None], axis=-1)
    kept = np.where(keep, logprobs, -np.inf)
    top = kept.max(-1, keepdims=True)
    return kept - (top + np.log(np.exp(kept - top).sum(-1, keepdims=True)))


@dataclass
class Mirostat:
    """Mirostat with target surprise `tau` (bits per symbol), learning rate `lr` (the paper's eta) and `m` (the top
    probabilities for s_hat); `mu` holds each row's maximal surprise during a generation."""

    tau: float
    lr: float = 0.1
    m: int = 100
    mu: np.ndarray | None = field(default=None, repr=False)
    method: str = field(default=MIROSTAT, init=False)

    def __post_init__(self):
        problems = [f"decoding.{key}: {value!r} {why}" for key, value, bad, why in (
            ("mirostat_tau", self.tau, not self.tau > 0, "must be > 0 (bits)"),
            ("mirostat_lr", self.lr, not self.lr > 0, "must be > 0"),
            ("mirostat_m", self.m, not (isinstance(self.m, int | np.integer) and self.m >= 2),
             "must be an integer >= 2"),
        ) if bad]
        if problems:
            raise ValueError("mirostat: " + "; ".join(problems))

    def restart(self, rows: int) -> None:
        """A new generation of `rows` rows: every mu back to 2 tau."""
        self.mu = np.full(rows, 2.0 * self.tau)

    def k(self, logprobs: np.ndarray) -> np.ndarray:
        """k of each row (B, V) at the current mu."""
        if self.mu is None or len(self.mu) != len(logprobs):
            raise RuntimeError(f"mirostat: {len(logprobs)} rows but mu holds "
                               f"{'none' if self.mu is None else len(self.mu)}: call restart(rows) first")
        return top_k_size(zipf_exponent(logprobs, self.m), self.mu, logprobs.shape[-1])

    def __call__(self, logprobs: np.ndarray) -> np.ndarray:
        """The distribution each row (B, V) draws from at this step: its top k, renormalised."""
        return top_k_rows(logprobs, self.k(logprobs))

    def observe(self, logprobs: np.ndarray, drawn: np.ndarray) -> None:
        """After the draw: mu <- mu - lr (surprise of each row's drawn symbol under `logprobs`, in bits, - tau)."""
        surprise = -logprobs[np.arange(len(drawn)), drawn] / LN2
        self.mu = self.mu - self.lr * (surprise - self.tau)


def sampler_decoding_settings(decoding: Mapping, methods: Sequence[str], token: bool = False) -> dict:
    """What a sampling job's samples depend on of the config's `decoding` section: `decoding_settings` of `methods`,
    with mirostat's settings where it is among them: its tau in bits per byte (`mirostat_tau`), or for the token
    track in bits per token (`mirostat_token_tau`), under the key `mirostat_tau`."""
    settings = decoding_settings(decoding, list(methods))
    if MIROSTAT in methods:
        settings |= {"mirostat_tau": decoding["mirostat_token_tau" if token else "mirostat_tau"],
                     "mirostat_lr": decoding["mirostat_lr"], "mirostat_m": decoding["mirostat_m"]}
    return settings


def sampling_decodings(settings: Mapping) -> list[Decoding | Mirostat]:
    """One decoding per method of a sampling job's settings (`methods` in order): `decodings_from_config`'s, and
    `Mirostat` for mirostat, from its keys (`sampler_decoding_settings`)."""
    methods: Sequence[str] = settings["methods"]
    others = iter(decodings_from_config({**settings, "methods": [m for m in methods if m != MIROSTAT]}))
    return [Mirostat(settings["mirostat_tau"], settings["mirostat_lr"], settings["mirostat_m"]) if m == MIROSTAT
            else next(others) for m in methods]
