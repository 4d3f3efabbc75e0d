"""Snakemake adapter (rule sample): continuations of the sampling prompts by a byte-level model from its checkpoint,
with every decoding method, BAT sampling's included. The token track samples in rules sample_direct and sample_bat
(scripts of their own), which rule join_samples joins."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import solver_settings
from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.generation.samples import byte_head_matrix, sample_model
from oversmooth.workflow.rules import rule_byte_lm

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, lm = smk.params.sampling, rule_byte_lm(smk)
    decodings = bat_decodings(sampling_decodings(smk.params.decoding), lambda: byte_head_matrix(lm),
                              solver_settings(smk.params.bat), model=lm.name)
    sample_model(
        lm, read_parquet(smk.input.prompts), decodings, smk.output[0],
        continuation_bytes=settings["continuation_bytes"], batch_size=settings["batch_size"], seed=smk.params.seed,
        n_prompts=settings["n_prompts"], document_context=smk.params.document_context,
    )
