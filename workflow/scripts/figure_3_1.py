"""Snakemake adapter: Figure 3.1, training and validation loss curves per model."""

import pandas as pd

from oversmooth.logs import log_to_file
from oversmooth.report import figure_3_1, save_figure

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    logs = {name: pd.read_csv(path) for name, path in zip(smk.params.models, smk.input.logs)}
    save_figure(figure_3_1(logs), smk.output.png, smk.output.pdf)
