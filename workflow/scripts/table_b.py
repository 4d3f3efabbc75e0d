"""Snakemake adapter: Table B, unargmaxable classes per bottleneck (exact and approximate); or its token-track
version, unargmaxable tokens per rank-k head with the most frequent of them in the training text."""

import json
from pathlib import Path

from oversmooth.core.io import read_parquet
from oversmooth.core.job import workflow_job
from oversmooth.models.tokentext import token_text
from oversmooth.reporting.argmax_report import table_b, unargmaxable_token_table
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    records = [json.loads(Path(path).read_text()) for path in smk.input.records]
    if "states" in smk.input.keys():
        targets = read_parquet(smk.input.states, columns=["target"]).column("target").to_numpy()
        text = token_text(Path(smk.input.lm).parent, config_key="tokens.source")
        write_table(unargmaxable_token_table(records, targets, text), smk.output[0])
    else:
        write_table(table_b(records), smk.output[0])
