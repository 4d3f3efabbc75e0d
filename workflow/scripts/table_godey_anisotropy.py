"""Snakemake adapter: the anisotropy table of every trained model (Godey et al. 2024; rule table_godey_anisotropy)."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.reporting.rank_report import anisotropy_table
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    write_table(anisotropy_table({m: pd.read_csv(p) for m, p in zip(smk.params.models, smk.input)}), smk.output[0])
