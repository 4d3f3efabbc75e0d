"""Snakemake adapter: convert the packaged SmolLM2 GGUF once into a transformers folder (rule convert_smollm2)."""

from pathlib import Path

from oversmooth.core.logs import log_to_file
from oversmooth.models.causallm import convert_smollm2

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    convert_smollm2(Path(smk.output[0]).parent)
