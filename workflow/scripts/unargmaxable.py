"""Snakemake adapter: unargmaxable classes of one head (rule unargmaxable): a bottleneck's byte classes, approximate
and exact, or a token-track head's tokens, exact."""

from oversmooth.analysis.argmax import linear_head_vertices, report_record, unargmaxable_classes, vertex_record
from oversmooth.analysis.tokenheads import load_head
from oversmooth.core.allocator import keep_freed_memory
from oversmooth.core.io import write_json
from oversmooth.core.job import workflow_job
from oversmooth.models.checkpoints import load_model

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    keep_freed_memory()  # allocates and frees large arrays at every step (oversmooth.core.allocator)
    settings, model = smk.params.settings, smk.wildcards.model
    if "head" in smk.input.keys():
        head, meta = load_head(smk.input.head)
        report = linear_head_vertices(head.up.weight.detach().double().numpy(), seed=smk.params.seed, tol=settings["tol"])
        write_json(smk.output[0], vertex_record(model, report, meta["rank"]))
    else:
        head = load_model(smk.input.checkpoint).head
        report = unargmaxable_classes(head, patience=settings["patience"], seed=smk.params.seed, tol=settings["tol"])
        write_json(smk.output[0], report_record(model, report, head.out.weight.shape[1]))
