"""Snakemake adapter (rule sample_direct): continuations of the token prompts by a token-track model (a rank-k head,
or tok-full) on its frozen source, with the track's methods but BAT sampling's; rule join_samples joins them to
rule sample_bat's. No BAT code: an edit to the solver reruns BAT sampling, not this job."""

from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.workflow.tokensampling import sample_token_rule

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    decodings = sampling_decodings(smk.params.decoding)
    sample_token_rule(smk, lambda head: decodings)
