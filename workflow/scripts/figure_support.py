"""Snakemake adapter: false against lost support, a curve per decoding method, a panel per model (rule
figure_support)."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import figure_support

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    save_figure(figure_support(pd.read_csv(smk.input[0])), smk.output.png, smk.output.pdf)
