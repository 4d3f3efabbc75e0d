"""Snakemake adapter: a figure of the training logs, Figure 3.1 (loss curves) or Godey et al.'s singular entropy
of the head during training."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.core.plotting import save_figure
from oversmooth.reporting import figures

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    logs = {name: pd.read_csv(path) for name, path in zip(smk.params.models, smk.input.logs)}
    save_figure(getattr(figures, smk.wildcards.figure)(logs), smk.output.png, smk.output.pdf)
