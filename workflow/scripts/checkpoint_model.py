"""Snakemake adapter: the weights a finished training run kept at one iteration, as a model of its own."""

from pathlib import Path

from oversmooth.core.job import workflow_job
from oversmooth.models.train import export_checkpoint

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    train_dir = Path(smk.input.trained).parent
    export_checkpoint(train_dir, int(smk.wildcards.iteration), smk.output[0], f"{smk.wildcards.model}@{smk.wildcards.iteration}")
