"""Snakemake adapter: continuations of the sampling prompts by one model with every decoding method (rule sample)."""

from oversmooth.decoding import decodings_from_config
from oversmooth.io import read_parquet
from oversmooth.logs import log_to_file
from oversmooth.rules import rule_byte_lm
from oversmooth.sampling import sample_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    lm = rule_byte_lm(smk)
    settings = smk.params.sampling
    sample_model(
        lm, read_parquet(smk.input.prompts), decodings_from_config(smk.params.decoding), smk.output[0],
        continuation_bytes=settings["continuation_bytes"], batch_size=settings["batch_size"],
        seed=smk.params.seed, n_prompts=settings["n_prompts"],
    )
