"""TBAT, the total BAT-reject set mass (thesis §4.1.6, appendix D), at sampled positions of a model after each
decoding method: the TBAT job's side of the BAT solver (`oversmooth.analysis.bat`, which has the definition and the
method). Each worker process holds one solver for its positions, BLAS on one thread; the results go to Parquet."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import threadpoolctl

from oversmooth.analysis.bat.polytope import row_basis
from oversmooth.analysis.bat.settings import TBATSettings
from oversmooth.analysis.bat.solver import BATSolver
from oversmooth.analysis.decodedrows import DecodedRows
from oversmooth.core.io import write_parquet
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import SampledRows

log = get_logger("tbat")


@dataclass(frozen=True)
class TBATRow:
    index: int
    tbat: float
    n_rejected: int
    lp_solves: int
    failed: bool


def tbat_positions(
    W: np.ndarray, probs: np.ndarray, settings: TBATSettings, *, basis: np.ndarray | None = None, workers: int = 1,
    log_every: int = 0
) -> list[TBATRow]:
    """TBAT of every row of `probs` (n, V) for head matrix W (its row basis `basis` where known), over `workers`
    processes."""
    if workers <= 1 or len(probs) < 2 * workers:
        return list(_tbat_chunk(W, basis, probs, settings, 0, log_every))
    chunks = np.array_split(np.arange(len(probs)), workers)
    with worker_pool(workers) as pool:
        futures = [pool.submit(_tbat_list, W, basis, probs[c], settings, int(c[0]), log_every) for c in chunks
                   if len(c)]
        return [row for f in futures for row in f.result()]


def worker_pool(workers: int) -> ProcessPoolExecutor:
    """`workers` processes for TBAT's positions, each with BLAS on one thread."""
    return ProcessPoolExecutor(workers, initializer=one_blas_thread)


def one_blas_thread() -> None:
    """BLAS on one thread in this process: a TBAT worker's. Snakemake sets OPENBLAS_NUM_THREADS to a job's threads,
    which are its workers here, and each would start that many. With two threads on two cores the polish's
    matrix-vector products took 14 times as long (3.2 ms against 0.23), and its LPs for 40 tokens of SmolLM2's head
    24.4 s against 11.6."""
    threadpoolctl.threadpool_limits(1)


def _tbat_list(W, basis, probs, settings, offset, log_every) -> list[TBATRow]:
    return list(_tbat_chunk(W, basis, probs, settings, offset, log_every))


def _tbat_chunk(W: np.ndarray, basis: np.ndarray | None, probs: np.ndarray, settings: TBATSettings, offset: int,
                log_every: int) -> Iterator[TBATRow]:
    solver = BATSolver(W, settings, basis)
    started = time.perf_counter()
    for n, p in enumerate(probs):
        result = solver.reject_set(p)
        yield TBATRow(offset + n, result.tbat(p), int(result.rejected.sum()), result.lp_solves, result.failed)
        if log_every and (n + 1) % log_every == 0:
            log.info("pid %d: %d/%d positions, %.1f s", os.getpid(), n + 1, len(probs), time.perf_counter() - started)


TBAT_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("method", pa.string()),
        ("tbat", pa.float64()),
        ("n_rejected", pa.int32()),  # of up to 49,152 tokens in the token track
        ("lp_solves", pa.int32()),
        ("failed", pa.bool_()),
    ]  # no wall-clock seconds: the same inputs give the same bytes (the job's log and benchmark time it)
)


def model_tbat(
    W: np.ndarray,
    rows: SampledRows,
    out_path: str | os.PathLike,
    decodings: Sequence,
    settings: TBATSettings,
    *,
    workers: int = 1,
    decoded: DecodedRows | None = None,
) -> pa.Table:
    """TBAT at sampled positions (`rows`: the same for every model) after each decoding, and at the rows of `decoded`
    (BA-epsilon and BA-eta, decoded once by rule bat_decode at their own positions) for each of its methods, to
    Parquet."""
    basis = row_basis(np.asarray(W, dtype=np.float64), settings.rank_tol)  # once for every decoding
    log.info("k = %d (rank of [W^T; 1^T] %d), V = %d: %d positions x %d decodings%s, %d workers", W.shape[1],
             basis.shape[0], W.shape[0], len(rows.position), len(decodings),
             "" if decoded is None else f" + {len(decoded.position)} decoded rows ({decoded.path})", workers)
    tables = [_method_tbat(W, basis, settings, workers, decoding.method, rows.prompt_id, rows.position,
                           decoding(rows.logprobs.astype(np.float64))) for decoding in decodings]
    if decoded is not None:
        for method in dict.fromkeys(decoded.method):  # the file's order
            mine = decoded.method == method
            tables.append(_method_tbat(W, basis, settings, workers, method, decoded.prompt_id[mine],
                                       decoded.position[mine], decoded.logprobs[mine]))
    table = pa.concat_tables(tables)
    write_parquet(table, out_path)
    return table


def _method_tbat(W: np.ndarray, basis: np.ndarray, settings: TBATSettings, workers: int, method: str,
                 prompt_id: np.ndarray, position: np.ndarray, logprobs: np.ndarray) -> pa.Table:
    """One method's TBAT rows: TBAT of each decoded row (log-probabilities, -inf where removed)."""
    probs = np.exp(logprobs)
    probs /= probs.sum(1, keepdims=True)
    started = time.perf_counter()
    results = tbat_positions(W, probs, settings, basis=basis, workers=workers, log_every=max(1, len(probs) // 5))
    log.info("%s: mean TBAT %.4g, %d LP solves, %d solver failures, %.1f s", method,
             np.nanmean([r.tbat for r in results]), sum(r.lp_solves for r in results), sum(r.failed for r in results),
             time.perf_counter() - started)
    return pa.table({
        "prompt_id": np.asarray(prompt_id, dtype=np.int32), "position": np.asarray(position, dtype=np.int32),
        "method": [method] * len(results), "tbat": [r.tbat for r in results],
        "n_rejected": np.array([r.n_rejected for r in results], dtype=np.int32),
        "lp_solves": np.array([r.lp_solves for r in results], dtype=np.int32), "failed": [r.failed for r in results],
    }, schema=TBAT_SCHEMA)
