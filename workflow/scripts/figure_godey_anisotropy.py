"""Snakemake adapter: anisotropy against relative depth, one line per model, from Godey et al.'s anisotropy table
(its runs; rule figure_godey_anisotropy)."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import anisotropy_figure
from oversmooth.reporting.seeds import without_seed_rows

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    save_figure(anisotropy_figure(without_seed_rows(pd.read_csv(smk.input[0]))), smk.output.png, smk.output.pdf)
