"""Snakemake adapter: Table 3.1, held-out loss and argmax accuracy of every model."""

import json

from oversmooth.core.job import workflow_job
from oversmooth.reporting.report import table_3_1
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    results = [json.loads(open(path).read()) for path in smk.input.results]
    configs = [json.loads(open(path).read()) for path in smk.input.configs]
    best_val = {c["name"]: c["best_val_loss"] for c in configs}
    write_table(table_3_1(results, smk.params.ground_truths, best_val), smk.output[0])
