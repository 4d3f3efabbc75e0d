"""Snakemake adapter: the anisotropy table and figure of every trained model (Godey et al. 2024)."""

import pandas as pd

from oversmooth.logs import log_to_file
from oversmooth.plotting import save_figure
from oversmooth.rank import anisotropy_figure, anisotropy_table
from oversmooth.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    table = anisotropy_table({m: pd.read_csv(p) for m, p in zip(smk.params.models, smk.input)})
    write_table(table, smk.output.table)
    save_figure(anisotropy_figure(table), smk.output.png, smk.output.pdf)
