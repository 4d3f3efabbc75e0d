"""A language whose truth is known: documents sampled from a teacher byte model.

Each document starts with a fixed start byte and is continued by pure sampling from the truth with the teacher's
key/value cache, up to `document_bytes` bytes in all, at most the teacher's block: every byte of a document was
drawn from the truth's next-byte distribution given the whole document before it. The truth is the teacher's own
distribution, or, with the source's `decoding` (a truth with known support), that decoding applied to it
(`oversmooth.generation.decoded`: the stepper `sampling.stepper_for` gives a decoded truth draws from the decoded
rows, exact zeros included). Those conditionals are therefore the *exact* distribution of the text, and a model
evaluated on a window of a document with the document before it as context is compared with the truth, not with
another model of the data.

Every document draws its bytes by inverting the CDF at uniforms from its own generator, seeded by (seed, teacher,
document): the batch size changes nothing and adding documents changes none of the others. The log-probability
of each document under the conditionals that drew it is kept beside its text, so that the pipeline's own
probability of the text can be checked against it (tests/test_teacher.py).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import torch

from oversmooth.analysis.decoding import PARAMETER, Decoding
from oversmooth.core.io import write_parquet
from oversmooth.core.logs import get_logger
from oversmooth.generation.decoded import DecodedStepper
from oversmooth.generation.sampling import Stepper, draw, uniforms_for

log = get_logger("teacher")

TEACHER_DOCUMENTS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("text", pa.binary()),
        ("logprob", pa.float64()),  # natural log of the document's probability under the teacher, start byte given
        ("seed", pa.int64()),
    ]
)
PURE = Decoding("pure")


class TeacherError(ValueError):
    """A teacher cannot write the corpus the config asks for; the message names the setting."""


@dataclass(frozen=True)
class TeacherSpec:
    """What a teacher writes: `documents` documents of `document_bytes` bytes each, the first one `start_byte`."""

    documents: int
    document_bytes: int
    start_byte: int = 10
    batch_size: int = 64

    def check(self, block_size: int, where: str = "the teacher source") -> None:
        """A document longer than the teacher's block would be drawn from a truncated context: not the truth."""
        if not 2 <= self.document_bytes <= block_size:
            raise TeacherError(f"{where}: document_bytes {self.document_bytes} must lie in [2, {block_size}], the "
                               "teacher's block_size, so that every byte is drawn given the whole document before it")
        if not 0 <= self.start_byte < 256:
            raise TeacherError(f"{where}: start_byte {self.start_byte} is no byte")


def document_seed(seed: int, teacher: str, index: int) -> int:
    """A 63-bit seed that depends only on (seed, teacher, document index)."""
    digest = hashlib.blake2b(f"{seed}/teacher/{teacher}/{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def sample_batch(stepper: Stepper, start_byte: int, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Documents (B, 1 + n) that start with `start_byte` and go on by pure sampling from the stepper's rows at
    `uniforms` (B, n), and the float64 log-probability (B,) of each under the conditionals that drew its bytes
    (a `DecodedStepper`'s rows: the decoded truth's)."""
    rows, n = uniforms.shape
    text = torch.full((rows, 1), start_byte, dtype=torch.long)
    logprob = torch.zeros(rows, dtype=torch.float64)
    logprobs = stepper.start(text)
    new = []
    for t in range(n):
        byte = draw(logprobs, PURE, uniforms[:, t])
        logprob += logprobs.gather(-1, byte[:, None]).squeeze(-1).double()
        new.append(byte)
        if t + 1 < n:
            logprobs = stepper.step(byte)
    return torch.cat([text, torch.stack(new, dim=1)], dim=1), logprob


def iter_documents(stepper: Stepper, spec: TeacherSpec, teacher: str, seed: int) -> Iterator[dict]:
    """The teacher's documents in order, as rows of TEACHER_DOCUMENTS_SCHEMA, batch by batch."""
    spec.check(stepper.block_size)
    started, done = time.perf_counter(), 0
    for first in range(0, spec.documents, spec.batch_size):
        indices = range(first, min(first + spec.batch_size, spec.documents))
        seeds = [document_seed(seed, teacher, i) for i in indices]
        texts, logprobs = sample_batch(stepper, spec.start_byte, uniforms_for(seeds, spec.document_bytes - 1))
        for i, s, text, logprob in zip(indices, seeds, texts.tolist(), logprobs.tolist()):
            yield {"doc_id": f"{teacher}:{i}", "text": bytes(text), "logprob": logprob, "seed": s}
        done += len(indices)
        elapsed = time.perf_counter() - started
        log.info("%d/%d documents, %.0f bytes/s", done, spec.documents, done * (spec.document_bytes - 1) / elapsed)


def write_teacher_documents(stepper: Stepper, spec: TeacherSpec, teacher: str, seed: int,
                            out_path: str | os.PathLike) -> pa.Table:
    """Sample the teacher's corpus and write it to Parquet (atomically); the table written."""
    table = pa.Table.from_pylist(list(iter_documents(stepper, spec, teacher, seed)), schema=TEACHER_DOCUMENTS_SCHEMA)
    write_parquet(table, out_path)
    bits = -np.asarray(table.column("logprob")) / np.log(2)
    log.info("wrote %d documents of %d bytes: %.3f bits per sampled byte under the truth (its entropy rate)",
             table.num_rows, spec.document_bytes, bits.sum() / (table.num_rows * (spec.document_bytes - 1)))
    if isinstance(stepper, DecodedStepper):
        cut = stepper.truncation()
        decoding, parameter = stepper.decoding, PARAMETER.get(stepper.decoding.method)
        named = f"{decoding.method} ({parameter} {getattr(decoding, parameter)})" if parameter else decoding.method
        log.info("the truth is the teacher under %s: over %d drawn positions, %.1f%% had a byte set to 0, %.1f bytes "
                 "each on average, and %.2f%% of the teacher's mass was removed", named, cut["rows"],
                 100 * cut["share_with_zero"], cut["zero_bytes"], 100 * cut["cut_mass"])
    return table

