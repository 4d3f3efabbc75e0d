"""Shared fixtures: the repository root, small corpora written to temporary folders, one smoke run of the DAG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from workflow_helpers import snakemake

from oversmooth.prompts import PROMPTS_SCHEMA

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """One local run of the whole smoke DAG, shared by the workflow tests: (repo, workdir, dry-run output)."""
    workdir = tmp_path_factory.mktemp("smoke")
    dry = snakemake(workdir, "-n", "all")
    snakemake(workdir, "all")
    return REPO, workdir, dry.stdout + dry.stderr


def write_docs(folder: Path, docs: dict[str, bytes | str]) -> Path:
    """Write one file per document into `folder`; return the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        data = text.encode() if isinstance(text, str) else text
        (folder / name).write_bytes(data)
    return folder


def sentences(doc: int, n: int) -> str:
    """A document of `n` distinct sentences, easy to recognise in assertions."""
    return " ".join(f"Document {doc} says sentence number {i} is here." for i in range(n))


def prompts_table(n, context_len, window_len, seed=0):
    """`n` prompts of random printable bytes: a context and a window (also the sampling prefix)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        text = bytes(rng.integers(32, 127, size=context_len + window_len, dtype=np.uint8))
        rows.append(
            {"prompt_id": i, "doc_id": f"d{i}", "source": "test", "offset": context_len,
             "context": text[:context_len], "window": text[context_len:], "sample_prefix": text[context_len:],
             "human_continuation": b""}
        )
    return pa.Table.from_pylist(rows, schema=PROMPTS_SCHEMA)
