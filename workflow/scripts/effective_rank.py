"""Snakemake adapter: effective ranks of one model's representations (thesis §7.2, rule effective_rank)."""

import pandas as pd

from oversmooth.analysis.rank import rank_table, representations
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings = smk.params.rank
    matrices = representations(smk.input.hidden, smk.input.checkpoint, settings["positions"])
    write_csv(pd.DataFrame(rank_table(matrices, settings["threshold"])), smk.output[0])
