"""The token track's frozen source LM for a Snakemake adapter (apart from `rules`, whose byte models a token-track
job does not load, so that their code is not in its rules' code params)."""

from __future__ import annotations

from pathlib import Path

import torch

from oversmooth.models.bytelm import inference_device
from oversmooth.models.causallm import load_causal_lm


def rule_token_source(smk, device: str | None = None):
    """(model, tokenizer) of the token track's frozen source LM, the folder of the job's `lm` input; on `device`,
    by default CUDA when present, else the job's CPU threads."""
    torch.set_num_threads(smk.threads)
    return load_causal_lm(Path(smk.input.lm).parent, device=device or inference_device(), config_key="tokens.source")


def rule_token_head(smk):
    """(head, W, k) of the job's token-track head (CPU jobs): a rank-k head (`head` input) with its matrix (V x k,
    float64), or for tok-full (an `lm` input) its source's own head matrix, as the tensor `head_logits` multiplies
    and in float64."""
    from oversmooth.analysis.tokenheads import head_matrix, load_head, output_weight

    if "lm" in smk.input.keys():
        weight = output_weight(rule_token_source(smk, device="cpu")[0])
        return weight, weight.double().numpy(), weight.shape[1]
    head, meta = load_head(smk.input.head)
    return head, head_matrix(head), meta["rank"]
