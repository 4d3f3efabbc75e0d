"""Snakemake adapter: the support-recovery table, a row per model, decoding method and parameter (rule
table_support)."""

from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job
from oversmooth.reporting.support_report import read_support_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    write_csv(read_support_table(smk.params.models, smk.input.summaries), smk.output[0])
