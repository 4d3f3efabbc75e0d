"""Snakemake adapter: the rank of the training data's contextual distribution from n-gram log-probabilities
(Godey et al. 2024; rule ngram_rank)."""

import logging

import numpy as np
import pandas as pd

from oversmooth.analysis.rank import ngram_rank_rows
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings = smk.params.rank
    data = np.memmap(smk.input.train, dtype=np.uint8, mode="r")
    rows = ngram_rank_rows(data, settings["ngram_n"], settings["ngram_contexts"], settings["ngram_alpha"],
                           settings["threshold"], settings["energy_shares"])
    for row in rows:
        logging.getLogger("oversmooth.analysis.rank").info("n=%d: %s", row["n"], row)
    write_csv(pd.DataFrame(rows), smk.output[0])
