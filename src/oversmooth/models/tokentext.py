"""The text of each token of a local model folder's tokenizer, without transformers (which imports torch): the
`tokenizers` library reads the folder's tokenizer.json, the file transformers' fast tokenizer is built on, and
decodes a token as `AutoTokenizer.decode([token])` does (special tokens kept; checked on every SmolLM2 token)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def token_text(path: str | os.PathLike, config_key: str = "tokens.source") -> Callable[[int], str]:
    """token id -> its text, for the tokenizer of the model folder `path` (a missing folder blamed on `config_key`)."""
    from tokenizers import Tokenizer

    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"no model folder {folder} (config `{config_key}`)")
    if not (folder / "tokenizer.json").is_file():
        raise FileNotFoundError(f"{folder} has no tokenizer.json (a fast tokenizer's file; config `{config_key}`)")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return lambda token: tokenizer.decode([token], skip_special_tokens=False)
