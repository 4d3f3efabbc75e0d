"""Atomic file output and small file helpers shared by every stage."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.core.recovery import restore_advice

if TYPE_CHECKING:
    import pandas as pd


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; move it onto `path` only if the block succeeds.

    A job killed half-way leaves `path` untouched (absent or the previous version), never half-written. A kill that
    no `finally` survives (SIGKILL, a node lost) leaves its temporary behind: the next write of `path` removes it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=_temporary_prefix(path), suffix=TEMPORARY_SUFFIX, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_current_umask())  # mkstemp makes 0600; give the file normal permissions
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


TEMPORARY_SUFFIX = ".tmp"


def _temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_stale_temporaries(path: str | os.PathLike) -> list[Path]:
    """Remove the temporaries that earlier writes of `path` left (a killed job's); return them. Safe inside a
    Snakemake job: only the job that makes `path` writes it."""
    path = Path(path)
    prefix = _temporary_prefix(path)
    stale = [p for p in path.parent.glob(f"{glob.escape(prefix)}*{TEMPORARY_SUFFIX}") if p.is_file()]
    for temporary in stale:
        temporary.unlink(missing_ok=True)
    return stale


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as indented JSON, atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")


def write_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """Write an Arrow table to Parquet, atomically."""
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def sha256_file(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


class UnreadableInputError(ValueError):
    """An input file exists but cannot be read as what it should be; the message names the file."""


def check_zip_members(path: str | os.PathLike, advice: str | None = None) -> None:
    """Check every member of a zip archive (what `torch.save` writes) against its CRC-32, since `torch.load` reads
    damaged data without a word; a damaged file raises an UnreadableInputError naming it, the member and `advice`
    (by default, `restore_advice`: the command that rebuilds it)."""
    advice = advice or restore_advice(path)
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()  # the first member whose data or header is damaged
    except (zipfile.BadZipFile, EOFError, zlib.error) as err:
        raise UnreadableInputError(f"{os.fspath(path)}: not a readable torch file (a zip archive; "
                                   f"{type(err).__name__}: {err}). {advice}") from err
    if damaged is not None:
        raise UnreadableInputError(f"{os.fspath(path)}: damaged: its member {damaged} fails its CRC-32 check. {advice}")


@contextlib.contextmanager
def naming_parquet_errors(path: str | os.PathLike) -> Iterator[None]:
    """Re-raise Arrow's errors while reading `path` as an UnreadableInputError that names the file."""
    try:
        yield
    except (FileNotFoundError, PermissionError):
        raise  # these name the file already
    except (pa.ArrowException, OSError) as err:  # Arrow reports damaged pages as a bare OSError
        raise UnreadableInputError(f"{os.fspath(path)}: not a readable Parquet file ({type(err).__name__}: {err}). "
                                   f"{restore_advice(path)}") from err


def read_parquet(path: str | os.PathLike, **kwargs: Any) -> pa.Table:
    """`pyarrow.parquet.read_table`, with errors that name the file."""
    with naming_parquet_errors(path):
        return pq.read_table(path, **kwargs)


class ParquetInput(pq.ParquetFile):
    """`pyarrow.parquet.ParquetFile` whose opening and reading errors name the file."""

    def __init__(self, path: str | os.PathLike, **kwargs: Any):
        self.path = os.fspath(path)
        with naming_parquet_errors(self.path):
            super().__init__(self.path, **kwargs)

    def read_row_group(self, *args: Any, **kwargs: Any) -> pa.Table:
        with naming_parquet_errors(self.path):
            return super().read_row_group(*args, **kwargs)

    def read_row_groups(self, *args: Any, **kwargs: Any) -> pa.Table:
        with naming_parquet_errors(self.path):
            return super().read_row_groups(*args, **kwargs)

    def read(self, *args: Any, **kwargs: Any) -> pa.Table:
        with naming_parquet_errors(self.path):
            return super().read(*args, **kwargs)

    def iter_batches(self, *args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        with naming_parquet_errors(self.path):
            yield from super().iter_batches(*args, **kwargs)


def write_csv(frame: pd.DataFrame, path: str | os.PathLike) -> None:
    """A table as CSV (floats to 6 significant digits), atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.6g")
