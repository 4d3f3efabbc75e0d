"""Shared fixtures: the repository root and small corpora written to temporary folders."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo() -> Path:
    return REPO


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
