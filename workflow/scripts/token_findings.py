"""Snakemake adapter: the token track's findings as tests, from its Tables E.7, E.8 and B (rule token_findings)."""

import pandas as pd

from oversmooth.core.io import atomic_path, write_csv
from oversmooth.core.job import workflow_job
from oversmooth.reporting.findings import findings_page, findings_table, token_findings

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    tables = {name: pd.read_csv(path) for name, path in smk.input.items()}
    table = findings_table(token_findings(tables.get("table_e_7_tokens"), tables.get("table_e_8_tokens"),
                                          tables.get("table_b_tokens"), smk.params.confidence))
    write_csv(table, smk.output.table)
    with atomic_path(smk.output.page) as tmp:
        tmp.write_text(findings_page(table, smk.params.confidence,
                                     "The token track's findings as tests: a real LM's softmax bottleneck"))
