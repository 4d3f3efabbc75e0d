"""Snakemake adapter: convert the packaged SmolLM2 GGUF once into a transformers folder (rule convert_smollm2)."""

from pathlib import Path

from oversmooth.core.job import workflow_job
from oversmooth.models.causallm import convert_smollm2

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    convert_smollm2(Path(smk.output[0]).parent)
