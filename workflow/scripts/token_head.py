"""Snakemake adapter: one rank-k head of the token track, its source's W truncated by SVD or A B fitted on the
cached training states (rule token_head)."""

from oversmooth.analysis.tokenfit import build_head
from oversmooth.analysis.tokenheads import save_head
from oversmooth.core.allocator import keep_freed_memory
from oversmooth.core.job import workflow_job
from oversmooth.workflow.tokensource import rule_token_source

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    keep_freed_memory()  # a learned head's 49,152-column gradients, allocated and freed at every step
    model, _ = rule_token_source(smk)
    settings = smk.params.settings
    head, meta = build_head(model, settings, smk.input.get("states"))
    save_head(head, smk.output[0], meta)
