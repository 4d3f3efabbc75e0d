"""The Parquet files of next-byte log-probabilities: their schema, row groups of a fixed size so that two models'
files line up group by group, and reading them back one row group at a time or as a seeded sample of rows
(the same rows for every model, for TBAT and the timings). No torch: the analysis stages read
these files without loading a model (`logits` writes them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.core.io import ParquetInput
from oversmooth.data.bytenames import VOCAB_SIZE

ROW_GROUP_ROWS = 4096


LOGITS_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("position", pa.int32()),
        ("target", pa.uint8()),
        ("logprobs", pa.list_(pa.float32(), VOCAB_SIZE)),
    ]
)


def hidden_schema(pre_dim: int, post_dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("prompt_id", pa.int32()),
            ("position", pa.int32()),
            ("pre", pa.list_(pa.float32(), pre_dim)),
            ("post", pa.list_(pa.float32(), post_dim)),
        ]
    )


class LogitsError(ValueError):
    """Logit files that cannot be compared, or settings that cannot be met."""


class RowGroupWriter:
    """Buffers record batches and writes row groups of exactly `rows` rows (the last may be shorter)."""

    def __init__(self, path: os.PathLike, schema: pa.Schema, rows: int = ROW_GROUP_ROWS):
        self.writer = pq.ParquetWriter(path, schema)
        self.schema, self.rows, self.pending, self.n_pending = schema, rows, [], 0

    def write(self, table: pa.Table) -> None:
        self.pending.append(table)
        self.n_pending += table.num_rows
        while self.n_pending >= self.rows:
            self._flush(self.rows)

    def close(self) -> None:
        if self.n_pending:
            self._flush(self.n_pending)
        self.writer.close()

    def _flush(self, n: int) -> None:
        table = pa.concat_tables(self.pending)
        self.writer.write_table(table.slice(0, n), row_group_size=n)
        rest = table.slice(n)
        self.pending, self.n_pending = ([rest] if rest.num_rows else []), rest.num_rows


def fixed_list(values: np.ndarray) -> pa.FixedSizeListArray:
    """An (n, d) float32 array as a Parquet-ready fixed-size list column."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def list_to_numpy(column: pa.ChunkedArray | pa.FixedSizeListArray) -> np.ndarray:
    """A fixed-size list column as an (n, d) array, without a Python loop."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    width = array.type.list_size
    return array.flatten().to_numpy(zero_copy_only=False).reshape(-1, width)


@dataclass(frozen=True)
class LogitsBatch:
    prompt_id: np.ndarray
    position: np.ndarray
    target: np.ndarray
    logprobs: np.ndarray  # (n, 256) float32


def iter_logits(path: str | os.PathLike) -> Iterator[LogitsBatch]:
    """The rows of a logits file, one row group at a time (bounded memory)."""
    parquet = ParquetInput(path)
    _check_schema(parquet, path)
    for group in range(parquet.num_row_groups):
        yield _batch(parquet.read_row_group(group))


def iter_aligned_logits(path_a: str | os.PathLike, path_b: str | os.PathLike) -> Iterator[tuple[LogitsBatch, LogitsBatch]]:
    """Row groups of two models' logits over the same positions, side by side."""
    a, b = ParquetInput(path_a), ParquetInput(path_b)
    _check_schema(a, path_a)
    _check_schema(b, path_b)
    if [a.metadata.row_group(i).num_rows for i in range(a.num_row_groups)] != [
        b.metadata.row_group(i).num_rows for i in range(b.num_row_groups)
    ]:
        raise LogitsError(f"{path_a} and {path_b} hold different positions; extract both from the same prompts")
    for group in range(a.num_row_groups):
        batch_a, batch_b = _batch(a.read_row_group(group)), _batch(b.read_row_group(group))
        if not (np.array_equal(batch_a.prompt_id, batch_b.prompt_id) and np.array_equal(batch_a.position, batch_b.position)):
            raise LogitsError(f"{path_a} and {path_b} differ in prompt_id/position in row group {group}")
        yield batch_a, batch_b


def _check_schema(parquet: pq.ParquetFile, path: str | os.PathLike) -> None:
    schema = parquet.schema_arrow
    missing = [f.name for f in LOGITS_SCHEMA if f.name not in schema.names]
    if missing:
        raise LogitsError(f"{path}: not a logits file, missing column(s) {missing}")
    for field in LOGITS_SCHEMA:
        if schema.field(field.name).type != field.type:
            raise LogitsError(f"{path}: column {field.name!r} has type {schema.field(field.name).type}, expected {field.type}")


def _batch(table: pa.Table) -> LogitsBatch:
    return LogitsBatch(
        table.column("prompt_id").to_numpy(),
        table.column("position").to_numpy(),
        table.column("target").to_numpy(),
        list_to_numpy(table.column("logprobs")),
    )


def sample_positions(n_rows: int, wanted: int | str, seed: int) -> np.ndarray:
    """Sorted row indices of a seeded sample of `wanted` positions (`all`: every row)."""
    if wanted == "all" or int(wanted) >= n_rows:
        return np.arange(n_rows)
    return np.sort(np.random.default_rng(seed).choice(n_rows, size=int(wanted), replace=False))


class SampledRows(NamedTuple):
    """Sampled positions of a model's outputs: where they are, and the log-probabilities (n, V)."""

    prompt_id: np.ndarray
    position: np.ndarray
    logprobs: np.ndarray


def read_sampled_rows(logits_path: str | os.PathLike, rows: np.ndarray) -> SampledRows:
    """prompt_id, position and log-probabilities of the given row indices, one row group at a time."""
    wanted, base, parts = np.asarray(rows), 0, []
    for batch in iter_logits(logits_path):
        hit = wanted[(wanted >= base) & (wanted < base + len(batch.target))] - base
        if len(hit):
            parts.append((batch.prompt_id[hit], batch.position[hit], batch.logprobs[hit]))
        base += len(batch.target)
    if not parts:
        raise ValueError(f"{logits_path}: none of the {len(wanted)} sampled rows exist (the file has {base})")
    return SampledRows(*(np.concatenate(x) for x in zip(*parts)))


def sampled_logit_rows(logits_path: str | os.PathLike, positions: int | str, seed: int) -> SampledRows:
    """The seeded sample of `positions` rows of a logits file (the same rows for every model of the family)."""
    n_rows = ParquetInput(logits_path).metadata.num_rows
    return read_sampled_rows(logits_path, sample_positions(n_rows, positions, seed))
