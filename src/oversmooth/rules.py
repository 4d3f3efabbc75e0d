"""Helpers shared by the Snakemake adapters in `workflow/scripts/` (they receive the `snakemake` object)."""

from __future__ import annotations

import torch

from oversmooth.bytelm import ByteLM, inference_device, load_byte_lm


def rule_byte_lm(smk) -> ByteLM:
    """The job's model `{model}`: its checkpoint input, or the `hf` ground-truth entry in `params.ground_truth`;
    on CUDA when present, else on the job's CPU threads."""
    torch.set_num_threads(smk.threads)
    return load_byte_lm(
        smk.wildcards.model, checkpoint=smk.input.get("checkpoint"), hf=smk.params.ground_truth, device=inference_device()
    )
