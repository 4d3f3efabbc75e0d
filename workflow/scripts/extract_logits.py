"""Snakemake adapter: next-byte log-probabilities and hidden states of one model (rule extract_logits)."""

from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.extraction.logits import extract_logits
from oversmooth.workflow.rules import rule_byte_lm

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    lm = rule_byte_lm(smk)
    settings = smk.params.settings
    extract_logits(
        lm,
        read_parquet(smk.input.prompts),
        smk.output.logits,
        smk.output.hidden,
        batch_size=settings["batch_size"],
        min_context=settings["min_context"],
        hidden_positions=settings["hidden_positions"],
        seed=smk.params.seed,
    )
