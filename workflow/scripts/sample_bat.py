"""Snakemake adapter (rule sample_bat): continuations of the token prompts by a token-track model with one BAT
sampling method (BA-epsilon or BA-eta), its solver on the head's matrix; rule join_samples joins them to rule
sample_direct's."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import solver_settings
from oversmooth.analysis.tokenheads import token_head_matrix
from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.workflow.tokensampling import sample_token_rule

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    decodings, solver = sampling_decodings(smk.params.decoding), solver_settings(smk.params.bat)
    sample_token_rule(smk, lambda head: bat_decodings(decodings, lambda: token_head_matrix(head), solver,
                                                      model=smk.wildcards.model))
