"""Snakemake adapter: Table B, unargmaxable classes per bottleneck (exact and approximate)."""

import json

from oversmooth.argmax import table_b
from oversmooth.logs import log_to_file
from oversmooth.report import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with log_to_file(smk.log[0]):
    records = []
    for path in smk.input:
        with open(path) as f:
            records.append(json.load(f))
    write_table(table_b(records), smk.output[0])
