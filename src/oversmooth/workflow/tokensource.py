"""The token track's frozen source LM for a Snakemake adapter (apart from `rules`, whose byte models a token-track
job does not load, so that their code is not in its rules' code params)."""

from __future__ import annotations

from pathlib import Path

import torch

from oversmooth.models.bytelm import inference_device
from oversmooth.models.causallm import load_causal_lm


def rule_token_source(smk):
    """(model, tokenizer) of the token track's frozen source LM, the folder of the job's `lm` input; on CUDA when
    present, else on the job's CPU threads."""
    torch.set_num_threads(smk.threads)
    return load_causal_lm(Path(smk.input.lm).parent, device=inference_device(), config_key="tokens.source")
