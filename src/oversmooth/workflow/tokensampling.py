"""A token-track model's sampling job for a Snakemake adapter: rule sample_direct (the track's methods but BAT
sampling's) and rule sample_bat (one BAT-sampling method). Each rule has a script of its own, so that the BAT
solver's code is in sample_bat's code params only: an edit to it reruns no direct sampling, a GPU job at scale."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from oversmooth.analysis.decoding import Decoding
from oversmooth.analysis.tokenheads import load_head
from oversmooth.core.io import read_parquet
from oversmooth.generation.samples import sample_token_model
from oversmooth.workflow.tokensource import rule_token_source


def sample_token_rule(smk, decodings_for: Callable[[torch.nn.Module], Sequence[Decoding]]) -> None:
    """Sample the job's token-track model (wildcard `model`) with `decodings_for(head)` on the token prompts, to the
    job's output: its head is a rank-k head's factors (`head` input) or, for tok-full, its source's output layer."""
    model, tokenizer = rule_token_source(smk)
    head = load_head(smk.input.head)[0] if "head" in smk.input.keys() else model.get_output_embeddings()
    settings = smk.params.sampling
    sample_token_model(
        model, tokenizer, head.to(next(model.parameters()).device), smk.wildcards.model,
        read_parquet(smk.input.prompts), decodings_for(head), smk.output[0],
        continuation_tokens=settings["continuation_tokens"], batch_size=settings["batch_size"], seed=smk.params.seed,
    )
