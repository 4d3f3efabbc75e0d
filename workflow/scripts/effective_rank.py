"""Snakemake adapter: effective ranks of one model's representations (thesis §7.2, rule effective_rank)."""

import pandas as pd

from oversmooth.io import write_csv
from oversmooth.logs import log_to_file
from oversmooth.rank import rank_table, representations

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    settings = smk.params.rank
    matrices = representations(smk.input.hidden, smk.input.checkpoint, settings["positions"])
    write_csv(pd.DataFrame(rank_table(matrices, settings["threshold"])), smk.output[0])
