"""Snakemake adapter: Table 5.3, 6.2, 6.3, H.1 or table_truncation_quality, sample quality per model and decoding
method with the Human row."""

import pandas as pd

from oversmooth.core.job import workflow_job
from oversmooth.reporting.quality_report import quality_table
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    summaries = {m: pd.read_csv(p) for m, p in zip([*smk.params.models, "human"], smk.input)}
    write_table(quality_table(summaries, smk.params.models, smk.params.methods), smk.output[0])
