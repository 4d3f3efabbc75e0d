"""Snakemake adapter: the rank of the training data's contextual distribution from n-gram log-probabilities
(Godey et al. 2024; rule ngram_rank)."""

import logging

import pandas as pd

from oversmooth.analysis.rank import ngram_rank_rows
from oversmooth.core.io import write_csv
from oversmooth.core.job import workflow_job
from oversmooth.data.corpus import read_shard

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings = smk.params.rank
    data = read_shard(smk.input.train)
    rows = ngram_rank_rows(data, settings["ngram_n"], settings["ngram_contexts"], settings["ngram_alpha"],
                           settings["threshold"], settings["energy_shares"])
    for row in rows:
        logging.getLogger("oversmooth.analysis.rank").info("n=%d: %s", row["n"], row)
    write_csv(pd.DataFrame(rows), smk.output[0])
