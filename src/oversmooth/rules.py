"""Helpers shared by the Snakemake adapters in `workflow/scripts/` (they receive the `snakemake` object)."""

from __future__ import annotations

from pathlib import Path

import torch

from oversmooth.bytelm import ByteLM, inference_device, load_byte_lm


def rule_byte_lm(smk) -> ByteLM:
    """The job's model `{model}`: its checkpoint input, or the loaded ground truth's entry in `params.ground_truth`
    (a `token` model's folder is that of its `lm` input, and it must spell every byte the prompts may hold); on CUDA
    when present, else on the job's CPU threads."""
    torch.set_num_threads(smk.threads)
    entry = smk.params.ground_truth
    if entry is not None and entry["kind"] == "token":
        entry = {**entry, "path": str(Path(smk.input.lm).parent)}
    lm = load_byte_lm(smk.wildcards.model, checkpoint=smk.input.get("checkpoint"), ground_truth=entry, device=inference_device())
    if entry is not None and entry["kind"] == "token":
        from oversmooth.tokenmarginal import check_spelled_text

        check_spelled_text(lm.name, lm.vocab, smk.config["eval"]["unspellable_bytes"])
    return lm


def rule_token_source(smk):
    """(model, tokenizer) of the token track's frozen source LM, the folder of the job's `lm` input; on CUDA when
    present, else on the job's CPU threads."""
    from oversmooth.causallm import load_causal_lm  # transformers loads only for the jobs that need it

    torch.set_num_threads(smk.threads)
    return load_causal_lm(Path(smk.input.lm).parent, device=inference_device(), config_key="tokens.source")
