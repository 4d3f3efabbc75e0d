"""Snakemake adapter (rule sample): continuations of the sampling prompts by a byte-level model whose methods hold
no BAT sampling (an SVD head, a mixture of softmaxes, a loaded ground truth; every byte model where
`decoding.bat_methods` is empty). No BAT code: an edit to the solver reruns rule sample_with_bat, not this job. The
token track samples in rules sample_direct and sample_bat, which rule join_samples joins."""

from oversmooth.core.job import workflow_job
from oversmooth.generation.mirostat import sampling_decodings
from oversmooth.workflow.bytesampling import sample_byte_rule

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    decodings = sampling_decodings(smk.params.decoding)
    sample_byte_rule(smk, lambda lm: decodings)
