"""Snakemake adapter: validation loss of the learned, SVD-imposed and from-scratch rank-r heads against r (Godey et
al. 2024), from rule rank_constrained_head's table."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting.figures import rank_loss_figure

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    save_figure(rank_loss_figure(pd.read_csv(smk.input[0])), smk.output.png, smk.output.pdf)
