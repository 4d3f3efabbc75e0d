"""Snakemake adapter (rule sample_with_bat): continuations of the sampling prompts by a byte-level model whose
methods hold BAT sampling's (a bottlenecked run, a `nanogpt` ground truth), its solver on the head matrix W of the
model's checkpoint, with every other method of the model's too."""

from oversmooth.analysis.bat.sampler import bat_decodings
from oversmooth.analysis.bat.settings import solver_settings
from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.generation.samples import byte_head_matrix
from oversmooth.workflow.bytesampling import sample_byte_rule

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    decodings, solver = sampling_decodings(smk.params.decoding), solver_settings(smk.params.bat)
    sample_byte_rule(smk, lambda lm: bat_decodings(decodings, lambda: byte_head_matrix(lm), solver, model=lm.name))
