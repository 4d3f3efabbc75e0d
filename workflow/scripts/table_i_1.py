"""Snakemake adapter: Table I.1, seconds per position of each metric per bottleneck, ours beside the reference."""

import pandas as pd

from oversmooth.analysis.timing import table_i_1
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    write_csv(table_i_1({m: pd.read_csv(p) for m, p in zip(smk.params.models, smk.input)}), smk.output[0])
