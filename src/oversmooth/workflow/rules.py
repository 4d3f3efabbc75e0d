"""Helpers shared by the Snakemake adapters in `workflow/scripts/` (they receive the `snakemake` object)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch

from oversmooth.generation.decoded import decoded_truth
from oversmooth.models.bytelm import ByteLM, GPTByteLM, inference_device, load_hf_byte_lm
from oversmooth.models.checkpoints import load_model
from oversmooth.models.tokenmarginal import MarginalSettings, check_spelled_text, load_token_byte_lm


def rule_byte_lm(smk) -> ByteLM:
    """The job's model `{model}`: its checkpoint input, or the loaded ground truth's entry in `params.ground_truth`
    (a `token` model's folder is that of its `lm` input, and it must spell every byte the prompts may hold); on CUDA
    when present, else on the job's CPU threads. Where the model is a truth that writes under a decoding
    (`params.truth_decoding`, a teacher source's `decoding`; None for every other model), that decoding applied to
    its distributions (`generation.decoded`)."""
    torch.set_num_threads(smk.threads)
    entry = smk.params.ground_truth
    if entry is not None and entry["kind"] == "token":
        entry = {**entry, "path": str(Path(smk.input.lm).parent)}
    lm = load_byte_lm(smk.wildcards.model, checkpoint=smk.input.get("checkpoint"), ground_truth=entry, device=inference_device())
    if entry is not None and entry["kind"] == "token":
        check_spelled_text(lm.name, lm.vocab, smk.config["eval"]["unspellable_bytes"])
    return decoded_truth(lm, smk.params.truth_decoding)


def load_byte_lm(
    name: str, *, checkpoint: str | os.PathLike | None = None, ground_truth: Mapping | None = None, device: str | torch.device = "cpu"
) -> ByteLM:
    """A model of the pipeline: one trained here (its checkpoint), or a loaded ground truth (its config entry: `hf`,
    a byte-level model, or `token`, a token-level one marginalised to bytes)."""
    if ground_truth is not None and ground_truth.get("kind") == "token":
        fields = ("beam", "prune_ratio", "context_backoff_tokens", "batch_size")
        settings = MarginalSettings(**{k: ground_truth[k] for k in fields if k in ground_truth})
        dtype = ground_truth.get("dtype", "float32")
        return load_token_byte_lm(name, ground_truth["path"], settings, dtype=dtype, device=device)
    if ground_truth is not None:
        options = {k: ground_truth[k] for k in ("byte_offset", "bos_id", "dtype", "trust_remote_code") if k in ground_truth}
        return load_hf_byte_lm(name, ground_truth["path"], device=device, **options)
    if checkpoint is None:
        raise ValueError(f"model {name!r}: give a checkpoint or a loaded ground truth's config entry")
    return GPTByteLM(name, load_model(checkpoint, device))
