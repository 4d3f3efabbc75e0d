"""Decoded rows: a model's distributions after decodings too costly for every evaluation position (BA-epsilon and
BA-eta, an exact BAT reject set a row), written once at a seeded sample of positions (rule bat_decode) and read by
the metrics jobs of that model against every ground truth, aligned by (prompt_id, position).

No BAT code here: the metrics jobs read these rows without reaching the solver."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.core.io import atomic_path, read_parquet
from oversmooth.core.logs import get_logger
from oversmooth.extraction.logit_tables import SampledRows

log = get_logger("decoded_rows")


def decoded_schema(vocab: int) -> pa.Schema:
    """A row per sampled position and method: where it is, the method, and its decoded log-probabilities (float64,
    -inf on the entries the method removes)."""
    return pa.schema([("prompt_id", pa.int32()), ("position", pa.int32()), ("method", pa.string()),
                      ("logprobs", pa.list_(pa.float64(), vocab))])


class DecodedRows(NamedTuple):
    """Decoded log-probabilities (n, V) per (prompt_id, position, method), and the file they came from."""

    prompt_id: np.ndarray
    position: np.ndarray
    method: np.ndarray
    logprobs: np.ndarray
    path: str

    def within(self, prompt_id: np.ndarray, position: np.ndarray) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
        """For each method, the decoded rows at positions among (prompt_id, position) (a chunk): the method, each
        row's index in the chunk, and the rows' log-probabilities."""
        chunk = position_keys(prompt_id, position)
        order = np.argsort(chunk, kind="stable")
        at = np.minimum(np.searchsorted(chunk[order], self.keys), len(chunk) - 1)
        found = chunk[order][at] == self.keys
        for method in dict.fromkeys(self.method):  # the file's order
            rows = found & (self.method == method)
            yield method, order[at[rows]], self.logprobs[rows]

    @property
    def keys(self) -> np.ndarray:
        return position_keys(self.prompt_id, self.position)

    def check_all_found(self, seen: np.ndarray) -> None:
        """Raise, naming the file and the first position, where some rows (`seen` False) matched no position."""
        if not seen.all():
            first = np.flatnonzero(~seen)[0]
            raise ValueError(
                f"{self.path}: {int((~seen).sum())} decoded rows are at positions the logits do not have, the first "
                f"prompt_id {self.prompt_id[first]}, position {self.position[first]} ({self.method[first]}): the "
                "decoded file is from other logits or evaluation prompts; rebuild it (rule bat_decode)")


def position_keys(prompt_id: np.ndarray, position: np.ndarray) -> np.ndarray:
    """One int64 per (prompt_id, position)."""
    return (np.asarray(prompt_id, dtype=np.int64) << 32) | np.asarray(position, dtype=np.int64)


def write_decoded_rows(rows: SampledRows, decodings: Sequence, out_path: str | os.PathLike) -> int:
    """Each decoding of the sampled rows' log-probabilities (float64), a row per position and method, to Parquet
    (atomically); the rows written."""
    logprobs = rows.logprobs.astype(np.float64)
    n, vocab = logprobs.shape
    with atomic_path(out_path) as tmp:
        writer = pq.ParquetWriter(tmp, decoded_schema(vocab))
        for decoding in decodings:
            started = time.perf_counter()
            decoded = decoding(logprobs)
            writer.write_table(pa.table({
                "prompt_id": rows.prompt_id.astype(np.int32), "position": rows.position.astype(np.int32),
                "method": [decoding.method] * n,
                "logprobs": pa.FixedSizeListArray.from_arrays(pa.array(decoded.ravel()), vocab),
            }, schema=decoded_schema(vocab)))
            seconds = time.perf_counter() - started
            log.info("%s: %d positions in %.1f s (%.3g s a position), %.1f bytes kept on average", decoding.method, n,
                     seconds, seconds / max(n, 1), np.isfinite(decoded).sum(-1).mean())
        writer.close()
    return n * len(decodings)


def read_decoded_rows(path: str | os.PathLike) -> DecodedRows:
    """A decoded file (`write_decoded_rows`) as arrays."""
    table = read_parquet(path)
    logprobs = table.column("logprobs").combine_chunks()
    vocab = logprobs.type.list_size
    values = logprobs.flatten().to_numpy(zero_copy_only=False).reshape(-1, vocab)
    return DecodedRows(table.column("prompt_id").to_numpy(), table.column("position").to_numpy(),
                       np.asarray(table.column("method").to_pylist(), dtype=object), values, str(path))
