"""Snakemake adapter: Table 7.3, effective ranks of every trained model's representations."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.reporting.rank_report import table_7_3
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    write_table(table_7_3({m: pd.read_csv(p) for m, p in zip(smk.params.models, smk.input)}), smk.output[0])
