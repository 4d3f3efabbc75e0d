"""Support recovery: decoding as desmoothing, measured against a truth whose support is known (Hewitt et al. 2022
call truncation desmoothing: a model's distribution is the truth mixed with smoothing, and truncation tries to cut
the smoothing away).

With p the truth's next-byte distribution (zero where the teacher's own decoding truncated), m the model's
distribution and q = decode(m), per position:
- false support = sum over bytes with p = 0 of q: the mass the decoded distribution keeps where the truth writes
  nothing;
- lost support = sum over bytes with q = 0 of p: the true mass the decoding removed;
- separable: whether a threshold on the model's own probabilities can keep the truth's support and drop its zeros,
  i.e. every byte the truth writes is more probable under m than every byte it never writes (min over p > 0 of m
  > max over p = 0 of m; NaN where the truth has no zero). Where it is 0, no method that keeps the bytes above a
  threshold of m (greedy, top-k, top-p, epsilon, min-p) can recover the support exactly: the thesis's §2.3 claim,
  counted.

Everything is vectorised over positions in float64, as the metrics are.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.analysis.decoding import PARAMETER, Decoding
from oversmooth.analysis.summary import summarise
from oversmooth.core.io import atomic_path
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import SampledRows, sampled_logit_rows

log = get_logger("support")


def false_support(logq: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """The decoded distribution's mass on bytes the truth gives probability 0, per position."""
    return np.where(np.isneginf(logp), np.exp(logq), 0.0).sum(-1)


def lost_support(logq: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """The truth's mass on bytes the decoded distribution gives probability 0, per position."""
    return np.where(np.isneginf(logq), np.exp(logp), 0.0).sum(-1)


def threshold_separable(logm: np.ndarray, logp: np.ndarray) -> np.ndarray:
    """1.0 where a threshold on the model's probabilities separates the truth's support from its zeros, 0.0 where
    some byte the truth never writes is at least as probable under the model as one it writes, NaN where the truth
    has no zero (nothing to separate)."""
    zero = np.isneginf(logp)
    lowest_true = np.where(zero, np.inf, logm).min(-1)
    highest_false = np.where(zero, logm, -np.inf).max(-1)
    return np.where(zero.any(-1), (lowest_true > highest_false).astype(float), np.nan)


def support_recovery(logm: np.ndarray, logp: np.ndarray, decoding: Decoding) -> dict[str, np.ndarray]:
    """Per position, the false and lost support of `decoding` applied to the model's log-probabilities `logm`
    against the truth's `logp` (both (..., 256), normalised)."""
    logq = decoding(logm)
    return {"false_support": false_support(logq, logp), "lost_support": lost_support(logq, logp)}


# The grid: pure (the reference: the model's own distribution, its false support is the mass it leaks onto the
# truth's zeros) and each truncation method at each of its values. One row per position and decoding.
REFERENCE = "pure"
SUPPORT_METRICS = ("false_support", "lost_support")
SUPPORT_SCHEMA = pa.schema([
    ("prompt_id", pa.int32()),
    ("position", pa.int32()),
    ("method", pa.string()),
    ("parameter", pa.float64()),  # the method's parameter (NaN for pure)
    ("kept", pa.int32()),  # bytes the decoded distribution keeps
    ("false_support", pa.float64()),
    ("lost_support", pa.float64()),
    ("inseparable", pa.float64()),  # 1 - threshold_separable (pure rows only; NaN elsewhere and with no zero)
])


def grid_decodings(grid: Mapping[str, Sequence[float]]) -> list[Decoding]:
    """pure, then every method of `grid` (method -> its parameter's values) at each value, in grid order."""
    return [Decoding(REFERENCE), *(Decoding(method, **{PARAMETER[method]: value})
                                   for method, values in grid.items() for value in values)]


def parameter_of(decoding) -> float:
    """The parameter of a `Decoding` (or of a `BATDecoding`'s), NaN for a method without one."""
    plain = getattr(decoding, "decoding", decoding)
    return float(getattr(plain, PARAMETER[plain.method])) if plain.method in PARAMETER else math.nan


def support_rows(prompt_id: np.ndarray, position: np.ndarray, logm: np.ndarray, logp: np.ndarray,
                 decodings: Sequence) -> Iterator[pa.Table]:
    """Per decoding, a table of every position's false and lost support (and, for pure, whether the truth's support
    is a threshold set of the model's distribution), logging each decoding's seconds."""
    inseparable = 1.0 - threshold_separable(logm, logp)
    for decoding in decodings:
        started = time.perf_counter()
        logq = decoding(logm)
        n = len(position)
        yield pa.Table.from_pydict({
            "prompt_id": prompt_id, "position": position, "method": np.full(n, decoding.method),
            "parameter": np.full(n, parameter_of(decoding)), "kept": np.isfinite(logq).sum(-1),
            "false_support": false_support(logq, logp), "lost_support": lost_support(logq, logp),
            "inseparable": inseparable if decoding.method == REFERENCE else np.full(n, np.nan),
        }, schema=SUPPORT_SCHEMA)
        log.info("%s %g: %d positions in %.2f s", decoding.method, parameter_of(decoding), n,
                 time.perf_counter() - started)


def write_support(prompt_id: np.ndarray, position: np.ndarray, logm: np.ndarray, logp: np.ndarray,
                  decodings: Sequence, path: str | os.PathLike) -> None:
    """`support_rows` to Parquet (atomically)."""
    with atomic_path(path) as tmp:
        writer = pq.ParquetWriter(tmp, SUPPORT_SCHEMA)
        for table in support_rows(prompt_id, position, logm, logp, decodings):
            writer.write_table(table)
        writer.close()


def summarise_support(frame: pd.DataFrame, *, n_boot: int, confidence: float, seed: int) -> pd.DataFrame:
    """Mean and cluster-bootstrap interval (oversmooth.analysis.summary) of false and lost support per method and
    parameter, and of the inseparable share (pure's rows): columns `parameter` and the summary's."""
    parts = []
    for (method, parameter), group in frame.groupby(["method", "parameter"], sort=False, dropna=False):
        metrics = [*SUPPORT_METRICS, "inseparable"] if method == REFERENCE else list(SUPPORT_METRICS)
        summary = summarise(group, n_boot=n_boot, confidence=confidence, seed=seed, metrics=metrics)
        parts.append(summary.assign(parameter=parameter))
    summary = pd.concat(parts, ignore_index=True)
    return summary[["method", "parameter", *[c for c in summary.columns if c not in ("method", "parameter")]]]


def aligned_rows(model_logits: str | os.PathLike, truth_logits: str | os.PathLike, positions: int | str,
                 seed: int) -> tuple[SampledRows, SampledRows]:
    """The same seeded sample of positions from a model's and the truth's logits files (float64), checked to be the
    same positions and free of NaN."""
    model, truth = (sampled_logit_rows(path, positions, seed) for path in (model_logits, truth_logits))
    if not (np.array_equal(model.prompt_id, truth.prompt_id) and np.array_equal(model.position, truth.position)):
        raise ValueError(f"{model_logits} and {truth_logits} hold different positions; extract both from the same "
                         "prompts")
    for path, rows in ((model_logits, model), (truth_logits, truth)):
        broken = np.isnan(rows.logprobs).any(-1)
        if broken.any():  # a NaN would count as no mass: false and lost support 0, a NaN model row inseparable
            first = int(np.argmax(broken))
            raise ValueError(f"{path}: NaN log-probabilities at {int(broken.sum())} sampled positions (the first: "
                             f"prompt {rows.prompt_id[first]}, position {rows.position[first]}), which support "
                             "recovery cannot score: the model gives NaN there (a diverged training, whose losses "
                             "in its training log are NaN, or a broken checkpoint), so extracting its logits again "
                             "would not help")
    return (model._replace(logprobs=model.logprobs.astype(np.float64)),
            truth._replace(logprobs=truth.logprobs.astype(np.float64)))
