"""Snakemake adapter: choose the evaluation and sampling prompts (rule select_prompts)."""

from oversmooth.core.job import workflow_job
from oversmooth.core.recovery import noting_lost_outputs
from oversmooth.data.prompts import PromptSpec, write_prompts

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]), noting_lost_outputs(smk.output):  # a failure names what it cost and the way back
    p = smk.params
    spec = PromptSpec(
        n_prompts=p.n_prompts,
        window=p.window,
        context_bytes=p.context_bytes,
        prompt_bytes=p.prompt_bytes,
        continuation_bytes=p.continuation_bytes,
        sentence_marks=tuple(p.sentence_marks),
    )
    write_prompts(smk.input.eval_docs, smk.output.prompts, spec, seed=p.seed, unspellable=p.unspellable_bytes)
