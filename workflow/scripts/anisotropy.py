"""Snakemake adapter: anisotropy of one trained model's representations, layer by layer (rule anisotropy)."""

import pandas as pd

from oversmooth.analysis.rank import layer_anisotropy
from oversmooth.core.io import read_parquet, write_csv
from oversmooth.core.job import workflow_job

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    rows = layer_anisotropy(smk.input.checkpoint, read_parquet(smk.input.prompts), smk.params.positions, smk.params.seed)
    write_csv(pd.DataFrame(rows), smk.output[0])
