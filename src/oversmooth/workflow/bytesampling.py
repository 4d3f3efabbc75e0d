"""A byte model's sampling job for a Snakemake adapter: rule sample (a byte model whose methods hold no BAT
sampling) and rule sample_with_bat (one whose methods do: BAT sampling's solver on the head matrix W of its
checkpoint). Each rule has a script of its own, so that the BAT solver's code is in sample_with_bat's code params
only: an edit to it reruns no sampling of a model that runs no BAT method (an SVD head, a mixture of softmaxes, a
loaded ground truth)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from oversmooth.analysis.decoding import Decoding
from oversmooth.core.io import read_parquet
from oversmooth.generation.samples import sample_model
from oversmooth.models.bytelm import ByteLM
from oversmooth.workflow.rules import rule_byte_lm


def sample_byte_rule(smk, decodings_for: Callable[[ByteLM], Sequence[Decoding]]) -> None:
    """Sample the job's byte model (wildcard `model`) with `decodings_for(lm)` on the sampling prompts, to the job's
    output: `params.sampling`'s lengths and batch, `params.seed`, and after the document before the prompt where
    `params.document_context` (a teacher's truth scores the samples)."""
    settings, lm = smk.params.sampling, rule_byte_lm(smk)
    sample_model(
        lm, read_parquet(smk.input.prompts), decodings_for(lm), smk.output[0],
        continuation_bytes=settings["continuation_bytes"], batch_size=settings["batch_size"], seed=smk.params.seed,
        n_prompts=settings["n_prompts"], document_context=smk.params.document_context,
    )
