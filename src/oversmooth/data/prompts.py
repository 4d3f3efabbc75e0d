"""Evaluation prompts (thesis §4.2): windows that start right after a sentence end in eval documents.

Each prompt records its document, offset, the preceding context, the evaluation window (whose
next-byte distributions the metrics use) and, for sampling, a prefix and the true (human)
continuation that follows it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from oversmooth.core.io import ParquetInput, write_parquet
from oversmooth.core.logs import get_logger

log = get_logger("prompts")

DEFAULT_SENTENCE_MARKS = (". ", "! ", "? ", "\n")
PROMPTS_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("offset", pa.int64()),
        ("context", pa.binary()),
        ("window", pa.binary()),
        ("sample_prefix", pa.binary()),
        ("human_continuation", pa.binary()),
    ]
)


class PromptError(ValueError):
    """The evaluation pool cannot supply the prompts the config asks for."""


@dataclass(frozen=True)
class PromptSpec:
    """How many prompts, and how many bytes each part of a prompt has."""

    n_prompts: int
    window: int
    context_bytes: int
    prompt_bytes: int
    continuation_bytes: int
    sentence_marks: Sequence[str] = DEFAULT_SENTENCE_MARKS

    @property
    def span(self) -> int:
        """Bytes a prompt needs from its start: the window, and the sampling prefix plus continuation."""
        return max(self.window, self.prompt_bytes + self.continuation_bytes)


def prompt_capacity(document_bytes: Iterable[int], span: int) -> int:
    """At most how many non-overlapping prompts of `span` bytes documents of these sizes hold: a prompt starts after a
    sentence mark (offset >= 1) and ends inside its document, so a document of n bytes holds at most (n - 1) // span.
    Fewer than asked for and `select_prompts` must fail; as many do not promise them (sentence marks, unspellable
    bytes)."""
    return sum(max(0, (n - 1) // span) for n in document_bytes)


def sentence_start_pattern(marks: Sequence[str]) -> re.Pattern[bytes]:
    """Regex whose match ends right after a sentence mark that is followed by a non-space byte."""
    alternatives = b"|".join(re.escape(m.encode("utf-8")) for m in sorted(marks, key=len, reverse=True))
    return re.compile(b"(?:" + alternatives + rb")(?=\S)")


def sentence_starts(text: bytes, pattern: re.Pattern[bytes]) -> np.ndarray:
    """Offsets in `text` right after each sentence end (the next byte is not whitespace)."""
    return np.fromiter((m.end() for m in pattern.finditer(text)), dtype=np.int64)


class SpellableText:
    """Which documents a token-level ground truth can spell: those holding none of the `unspellable` bytes (config
    `eval.unspellable_bytes`; every document when there are none). Counts what it turns away, for the log."""

    def __init__(self, unspellable: Sequence[int] = ()):
        self.unspellable = sorted(set(unspellable))
        self.pattern = re.compile(b"[" + b"".join(re.escape(bytes([b])) for b in self.unspellable) + b"]") if self.unspellable else None
        self.skipped_documents = self.skipped_bytes = 0

    def accepts(self, text: bytes) -> bool:
        if self.pattern is None or self.pattern.search(text) is None:
            return True
        self.skipped_documents += 1
        self.skipped_bytes += len(text)
        return False

    def report(self, what: str) -> None:
        if self.unspellable:
            log.info("%s: skipped %d documents (%d bytes) holding bytes a token-level ground truth cannot spell %s",
                     what, self.skipped_documents, self.skipped_bytes, [f"0x{b:02X}" for b in self.unspellable])


def select_prompts(eval_docs_path: str | os.PathLike, spec: PromptSpec, seed: int, unspellable: Sequence[int] = ()) -> pa.Table:
    """Pick `spec.n_prompts` non-overlapping prompts uniformly (seeded) among all valid sentence starts of the
    documents that hold none of the `unspellable` bytes.

    The eval pool is streamed twice, one row group at a time: once for candidate offsets, once for
    the bytes of the chosen prompts, so memory stays bounded by the candidates, not the text.
    """
    parquet = ParquetInput(eval_docs_path)
    pattern = sentence_start_pattern(spec.sentence_marks)
    spellable = SpellableText(unspellable)
    doc_rows, starts = [], []
    row_base, n_bytes = 0, 0
    for batch in parquet.iter_batches(columns=["text"], batch_size=256):
        for i, text in enumerate(batch.column(0).to_pylist()):
            if not spellable.accepts(text):
                continue
            offsets = sentence_starts(text, pattern)
            offsets = offsets[offsets + spec.span <= len(text)]
            doc_rows.append(np.full(len(offsets), row_base + i, dtype=np.int64))
            starts.append(offsets)
            n_bytes += len(text)
        row_base += batch.num_rows
    n_docs = row_base - spellable.skipped_documents
    spellable.report("prompts")
    doc_rows_arr = np.concatenate(doc_rows) if doc_rows else np.zeros(0, np.int64)
    starts_arr = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    chosen = _choose_non_overlapping(doc_rows_arr, starts_arr, spec, seed)
    if len(chosen) < spec.n_prompts:
        raise PromptError(
            f"the evaluation pool ({eval_docs_path}: {n_docs} documents, {n_bytes} bytes, "
            f"{len(starts_arr)} sentence starts with {spec.span} bytes after them; "
            f"{spellable.skipped_documents} more documents skipped for bytes in eval.unspellable_bytes) supplies only "
            f"{len(chosen)} non-overlapping prompts, but eval.n_prompts asks for {spec.n_prompts}; "
            "lower eval.n_prompts, eval.window or sampling.continuation_bytes, or raise data.eval_fraction"
        )
    log.info("chose %d prompts among %d candidates in %d documents", len(chosen), len(starts_arr), n_docs)
    return _prompt_table(parquet, [(int(doc_rows_arr[c]), int(starts_arr[c])) for c in chosen], spec)


def _choose_non_overlapping(doc_rows: np.ndarray, starts: np.ndarray, spec: PromptSpec, seed: int) -> list[int]:
    """Visit candidates in a seeded random order; keep each whose span overlaps no kept one."""
    order = np.random.default_rng(seed).permutation(len(starts))
    kept: list[int] = []
    spans_by_doc: dict[int, list[int]] = {}
    for c in order:
        doc, start = int(doc_rows[c]), int(starts[c])
        if all(abs(start - other) >= spec.span for other in spans_by_doc.get(doc, ())):
            spans_by_doc.setdefault(doc, []).append(start)
            kept.append(int(c))
            if len(kept) == spec.n_prompts:
                break
    return kept


def _prompt_table(parquet: pq.ParquetFile, picks: list[tuple[int, int]], spec: PromptSpec) -> pa.Table:
    table = parquet.read(columns=["doc_id", "source"])
    rows_needed = sorted({row for row, _ in picks})
    texts = _read_rows(parquet, rows_needed)
    records = []
    for prompt_id, (row, start) in enumerate(picks):
        text = texts[row]
        window_end = start + spec.window
        prefix_end = start + spec.prompt_bytes
        records.append(
            {
                "prompt_id": prompt_id,
                "doc_id": table.column("doc_id")[row].as_py(),
                "source": table.column("source")[row].as_py(),
                "offset": start,
                "context": text[max(0, start - spec.context_bytes) : start],
                "window": text[start:window_end],
                "sample_prefix": text[start:prefix_end],
                "human_continuation": text[prefix_end : prefix_end + spec.continuation_bytes],
            }
        )
    return pa.Table.from_pylist(records, schema=PROMPTS_SCHEMA)


def _read_rows(parquet: pq.ParquetFile, rows: list[int]) -> dict[int, bytes]:
    """Texts of the given row indices, reading only the row groups that hold them."""
    wanted, out, base = set(rows), {}, 0
    for group in range(parquet.num_row_groups):
        n = parquet.metadata.row_group(group).num_rows
        hits = [r for r in wanted if base <= r < base + n]
        if hits:
            column = parquet.read_row_group(group, columns=["text"]).column(0)
            out.update({r: column[r - base].as_py() for r in hits})
        base += n
    return out


def write_prompts(eval_docs_path: str | os.PathLike, out_path: str | os.PathLike, spec: PromptSpec, seed: int,
                  unspellable: Sequence[int] = ()) -> pa.Table:
    """Select prompts and write them to Parquet atomically."""
    table = select_prompts(eval_docs_path, spec, seed, unspellable)
    write_parquet(table, out_path)
    return table


# ----------------------------------------------------------------------------------------------
# The token track's sampling prompts: whole tokens of a sub-word tokenizer

TOKEN_PROMPTS_SCHEMA = pa.schema(
    [
        ("prompt_id", pa.int32()),
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("offset", pa.int64()),
        ("prefix_ids", pa.list_(pa.int32())),
        ("continuation_ids", pa.list_(pa.int32())),
        ("sample_prefix", pa.binary()),
        ("human_continuation", pa.binary()),
    ]
)


def select_token_prompts(
    eval_docs_path: str | os.PathLike,
    tokenizer,
    *,
    n_prompts: int,
    prefix_tokens: int,
    continuation_tokens: int,
    bytes_per_token: float,
    seed: int,
) -> pa.Table:
    """`n_prompts` prompts of the token track: spans of the evaluation pool that start after a sentence end (chosen
    as `select_prompts` chooses), each tokenised whole; its first `prefix_tokens` tokens are given to the models and
    the next `continuation_tokens` are the human continuation. Both texts are the tokens decoded, as a model's
    sampled tokens are, so that human and model texts pass through the same detokenisation."""
    n_tokens = prefix_tokens + continuation_tokens
    span = math.ceil(n_tokens * bytes_per_token)
    spec = PromptSpec(n_prompts=n_prompts, window=span, context_bytes=0, prompt_bytes=0, continuation_bytes=0)
    spans = select_prompts(eval_docs_path, spec, seed)
    rows = []
    for row in spans.select(["prompt_id", "doc_id", "source", "offset", "window"]).to_pylist():
        ids = tokenizer(row.pop("window").decode("utf-8", errors="replace"), add_special_tokens=False)["input_ids"]
        if len(ids) < n_tokens:
            raise PromptError(
                f"prompt {row['prompt_id']} ({row['doc_id']}, byte {row['offset']}): {span} bytes give {len(ids)} tokens, "
                f"fewer than the {n_tokens} of tokens.sampling.prefix_tokens + continuation_tokens; raise "
                "tokens.sampling.bytes_per_token"
            )
        prefix, continuation = ids[:prefix_tokens], ids[prefix_tokens:n_tokens]
        rows.append({**row, "prefix_ids": prefix, "continuation_ids": continuation,
                     "sample_prefix": tokenizer.decode(prefix).encode("utf-8"),
                     "human_continuation": tokenizer.decode(continuation).encode("utf-8")})
    log.info("%d token prompts of %d + %d tokens", len(rows), prefix_tokens, continuation_tokens)
    return pa.Table.from_pylist(rows, schema=TOKEN_PROMPTS_SCHEMA)


def human_samples(prompts: pd.DataFrame, n_prompts: int | None) -> pd.DataFrame:
    """The true continuations of the sampling prompts, in the samples' layout (model and method `human`)."""
    chosen = prompts.head(n_prompts) if n_prompts else prompts
    return pd.DataFrame(
        {
            "model": "human", "method": "human", "prompt_id": chosen["prompt_id"].to_numpy(),
            "prefix": chosen["sample_prefix"].tolist(), "continuation": chosen["human_continuation"].tolist(),
            "text": [c.decode("utf-8", errors="replace") for c in chosen["human_continuation"]],
        }
    )
