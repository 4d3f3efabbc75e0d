"""BAT sampling (Finlayson et al. 2024), the BAT solver's second caller: BA-epsilon and BA-eta.

A method with threshold t (epsilon; eta's min(eta, sqrt(eta) exp(-H(p)))) keeps every token of p_i >= t, as
epsilon- or eta-sampling does, and a token below it only where the bottleneck proves it in the support: where no q
with q_i = 0 lies in the polytope of the package's docstring at bound p / (1 - t) (the token is not BAT-rejected).
The most probable token is always kept, as epsilon- and eta-sampling keep it. Sampling draws from p restricted to the
kept set, renormalised.

The sampler decides only the tokens it draws (`BATSampler.draw`): draw from p without the tokens already found
rejected at this position; a token at or above t, or one the solver proves kept, is the answer; one it proves
rejected is left out and the draw repeated. That is rejection sampling with a shrinking proposal, so each kept token
comes out with probability p_i / (mass of the kept set): exactly the kept set's distribution (the test enumerates
it), with one solver question per token drawn below t, not one per token of the vocabulary. Unlike the anchor's
sampler it never gives up after a number of draws, never falls back to greedy, and never takes a solver failure for
an acceptance: a failure raises `BATSamplingError`, naming the threshold and the token.

`BATDecoding` is the method as the pipeline's stages hold it: a `Decoding` (ba_epsilon or ba_eta, with its
parameter) bound to the model's head W. Called on log-probabilities it gives the decoded distribution of every row
(the kept set, every token below t decided: a TBAT reject set at t); its `draw` samples rows deciding the drawn
tokens alone."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import threadpoolctl

from oversmooth.analysis.bat.result import BATResult
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.bat.solver import BATSolver
from oversmooth.analysis.decoding import HEAD_METHODS, Decoding, entropy
from oversmooth.core.logs import get_logger

log = get_logger("bat_sampling")



class BATSamplingError(RuntimeError):
    """The solver could not decide a drawn token (never guessed): the message names the threshold and the token."""


def bat_threshold(decoding: Decoding, logprobs: np.ndarray) -> np.ndarray:
    """The threshold of each row of `logprobs` (..., V): epsilon for ba_epsilon, min(eta, sqrt(eta) exp(-H)) for
    ba_eta, as epsilon- and eta-sampling set theirs."""
    if decoding.method == "ba_epsilon":
        return np.full(logprobs.shape[:-1], decoding.epsilon)
    if decoding.method == "ba_eta":
        return np.minimum(decoding.eta, np.sqrt(decoding.eta) * np.exp(-entropy(logprobs)))
    raise ValueError(f"{decoding.method!r} is not a BAT sampling method; choose from {sorted(HEAD_METHODS)}")


@dataclass
class SamplingStats:
    """What the sampler did: tokens drawn, solver questions (one per draw below the threshold), the rejected among
    them, HiGHS solves, and the seconds spent in the solver."""

    tokens: int = 0
    questions: int = 0
    rejected: int = 0
    lp_solves: int = 0
    solver_seconds: float = 0.0

    def line(self, seconds: float) -> str:
        """One log line: tokens per second over `seconds`, questions and LPs per token."""
        per = max(self.tokens, 1)
        return (f"{self.tokens} tokens, {self.tokens / max(seconds, 1e-9):.2f} tokens/s, {self.questions / per:.3f} "
                f"solver questions and {self.lp_solves / per:.3f} LPs per token ({self.rejected} of "
                f"{self.questions} drawn tokens rejected), {self.solver_seconds:.1f} s in the solver")


@dataclass
class BATSampler:
    """Draws of BAT sampling for one head W (V x k); `basis`: its row basis where the caller has it."""

    W: np.ndarray
    settings: TBATSettings = TBATSettings()
    basis: np.ndarray | None = None
    stats: SamplingStats = field(default_factory=SamplingStats)
    log_seconds: float = 30.0  # a progress line in the log at most this often

    def __post_init__(self):
        self.solver = BATSolver(np.asarray(self.W, dtype=np.float64), self.settings, self.basis)
        self.started = self.logged = time.perf_counter()
        self.blas = threadpoolctl.ThreadpoolController()

    def one_blas_thread(self):
        """NumPy's BLAS on one thread while the solver runs (a context), as in TBAT's workers
        (`oversmooth.analysis.tbat.one_blas_thread`: the polish's products on two threads of two busy cores took 14
        times as long); a sampling job's threads are torch's."""
        return self.blas.limit(limits=1, user_api="blas")

    def restart(self) -> SamplingStats:
        """Zero the counts (a new method or model); the counts so far."""
        stats, self.stats = self.stats, SamplingStats()
        self.started = self.logged = time.perf_counter()
        return stats

    def log_progress(self) -> None:
        """The counts since `restart` in the log, every `log_seconds`."""
        now = time.perf_counter()
        if now - self.logged >= self.log_seconds:
            self.logged = now
            log.info("BAT sampling: %s", self.stats.line(now - self.started))

    def is_rejected(self, p: np.ndarray, token: int, threshold: float) -> bool:
        """Whether the solver proves `token` BAT-rejected at `threshold` (p_i below it); raises where it fails."""
        started = time.perf_counter()
        with self.one_blas_thread():
            result: BATResult = self.solver.reject_set(p, np.array([token]), threshold)
        self.stats.solver_seconds += time.perf_counter() - started
        self.stats.questions += 1
        self.stats.lp_solves += result.lp_solves
        if result.failed:
            raise BATSamplingError(f"the BAT solver failed on token {token} (p = {p[token]:.3g}) at threshold "
                                   f"{threshold:.3g}: {result.stats.get('status', 'no answer')}")
        self.stats.rejected += bool(result.rejected[token])
        return bool(result.rejected[token])

    def draw(self, p: np.ndarray, threshold: float, uniforms: Iterator[float]) -> int:
        """One token of the kept set's distribution (the module's docstring), each draw inverting the CDF of p
        without the tokens rejected so far at the next of `uniforms` (`redraw_uniforms`: the row's uniform, then
        numbers its own bits seed)."""
        p = np.asarray(p, dtype=np.float64)
        weights, largest = p.copy(), p.max()
        for uniform in uniforms:
            cdf = np.cumsum(weights)
            token = min(int(np.searchsorted(cdf, uniform * cdf[-1], side="right")), len(p) - 1)
            if p[token] >= min(threshold, largest) or not self.is_rejected(p, token, threshold):
                self.stats.tokens += 1
                self.log_progress()
                return token
            weights[token] = 0.0
        raise ValueError("the uniforms ran out before a token was kept")

    def kept(self, p: np.ndarray, threshold: float) -> np.ndarray:
        """The kept set of p (boolean over the V tokens): every token below `threshold` decided (a TBAT reject set
        at it); raises where the solver fails. At a threshold of 0 or less no token is below it: all are kept."""
        if threshold <= 0:
            return np.ones(len(p), dtype=bool)
        with self.one_blas_thread():
            result = self.solver.reject_set(np.asarray(p, dtype=np.float64), threshold=threshold)
        if result.failed:
            raise BATSamplingError(f"the BAT solver failed at threshold {threshold:.3g}: "
                                   f"{result.stats.get('status', 'no answer')}")
        return (~result.rejected & (p > 0)) | (p >= threshold) | (p == p.max())


@dataclass
class BATDecoding:
    """A BAT sampling method (`decoding`: ba_epsilon or ba_eta with its parameter) bound to a head's sampler."""

    decoding: Decoding
    sampler: BATSampler

    def __post_init__(self):
        bat_threshold(self.decoding, np.zeros(1))  # a BAT method, or a clear error

    @property
    def method(self) -> str:
        return self.decoding.method

    def __call__(self, logprobs: np.ndarray) -> np.ndarray:
        """The decoded log-probabilities of every row (..., V): the kept set's, renormalised, -inf elsewhere."""
        rows = logprobs.reshape(-1, logprobs.shape[-1])
        out = np.full_like(rows, -np.inf)
        for row, lp, threshold in zip(out, rows, bat_threshold(self.decoding, rows)):
            kept = self.sampler.kept(np.exp(lp), threshold)
            row[kept] = lp[kept] - np.logaddexp.reduce(lp[kept])
        return out.reshape(logprobs.shape)

    def draw(self, logprobs: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """One token per row of `logprobs` (B, V) at its uniform (B,), deciding the drawn tokens alone."""
        thresholds = bat_threshold(self.decoding, logprobs)
        return np.array([self.sampler.draw(np.exp(lp), t, redraw_uniforms(u))
                         for lp, t, u in zip(logprobs, thresholds, uniforms)], dtype=np.int64)


def redraw_uniforms(uniform: float) -> Iterator[float]:
    """A row's uniforms at one step: its own (the first draw inverts the CDF at it, as every other method's draw
    does), then for each redraw the next number of a generator seeded by its 64 bits: a row's tokens depend on its
    own uniforms alone, whatever the batch."""
    yield uniform
    redraws = np.random.default_rng(int(np.float64(uniform).view(np.uint64)))
    while True:
        yield redraws.random()


def bat_decodings(decodings: list, W: np.ndarray | Callable[[], np.ndarray | None] | None,
                  settings: TBATSettings = TBATSettings(), model: str = "the model") -> list:
    """`decodings` with each BAT method bound to the sampler of head matrix W (or of what W(), called only where a
    BAT method is asked for, gives; one solver for all of them: the row basis is the same); the others as they are.
    W None (a head that is not one softmax of a matrix) fails where a BAT method is asked for, naming the model."""
    wanted = [d for d in decodings if d.method in HEAD_METHODS]
    if not wanted:
        return list(decodings)
    W = W() if callable(W) else W
    if W is None:
        raise ValueError(f"{model}: {', '.join(d.method for d in wanted)} needs the head's matrix W (one softmax of "
                         "W h); this model has none (a mixture of softmaxes, or a model loaded from elsewhere): "
                         "leave BAT sampling out of its methods")
    sampler = BATSampler(W, settings)
    return [BATDecoding(d, sampler) if d.method in HEAD_METHODS else d for d in decodings]
