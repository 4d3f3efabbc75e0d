"""Snakemake adapter: unargmaxable classes of one head (rule unargmaxable): a bottleneck's byte classes, approximate
and exact, or a token-track head's (or tok-full's) tokens, exact."""

from oversmooth.analysis.argmax import linear_head_vertices, report_record, unargmaxable_classes, vertex_record
from oversmooth.core.allocator import keep_freed_memory
from oversmooth.core.catalog import is_token_model
from oversmooth.core.io import write_json
from oversmooth.core.job import workflow_job
from oversmooth.models.checkpoints import load_model
from oversmooth.workflow.tokensource import rule_token_head

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    keep_freed_memory()  # allocates and frees large arrays at every step (oversmooth.core.allocator)
    settings, model = smk.params.settings, smk.wildcards.model
    if is_token_model(model):
        _, W, k = rule_token_head(smk)
        report = linear_head_vertices(W, seed=smk.params.seed, tol=settings["tol"])
        write_json(smk.output[0], vertex_record(model, report, k))
    else:
        head = load_model(smk.input.checkpoint).head
        report = unargmaxable_classes(head, patience=settings["patience"], seed=smk.params.seed, tol=settings["tol"])
        write_json(smk.output[0], report_record(model, report, head.out.weight.shape[1]))
