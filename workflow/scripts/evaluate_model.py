"""Snakemake adapter: held-out loss and accuracy of one model (rule evaluate_model)."""

from oversmooth.core.io import write_json
from oversmooth.core.job import workflow_job
from oversmooth.models.evaluate import document_starts, heldout_metrics, heldout_pool
from oversmooth.workflow.rules import rule_byte_lm

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    lm = rule_byte_lm(smk)
    settings = smk.params.evaluation
    data, documents = heldout_pool(smk.input.eval_docs, settings["pool_bytes"],
                                   unspellable=smk.params.unspellable_bytes)
    starts = document_starts(documents, settings["block"]) if settings["from_document_start"] else None
    result = heldout_metrics(lm, data, windows=settings["windows"], block=settings["block"],
                             batch_size=settings["batch_size"], seed=smk.params.seed, starts=starts)
    write_json(smk.output[0], result)
