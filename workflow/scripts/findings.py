"""Snakemake adapter: the thesis's findings as tests, from the tables (rule findings)."""

import pandas as pd

from oversmooth.core.io import atomic_path, write_csv
from oversmooth.core.job import workflow_job
from oversmooth.reporting.findings import (
    findings_page,
    findings_table,
    greedy_findings,
    ground_truth_findings,
    loss_matched_findings,
    oversmoothing_findings,
    quality_findings,
    support_findings,
    svd_findings,
)

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    settings, confidence, truth = smk.params.findings, smk.params.confidence, smk.params.truth
    kinds = dict(smk.params.ground_truths)
    tables = {name: pd.read_csv(path) for name, path in smk.input.items()}
    rows = oversmoothing_findings(tables["table_4_1"], list(kinds), settings["moderate_k"], confidence)
    rows += ground_truth_findings(tables["table_4_1"], {gt: k for gt, k in kinds.items() if gt != truth}, confidence)
    if "table_7_1" in tables:
        rows += svd_findings(tables["table_7_1"], list(kinds), confidence)
    e_tables = {gt: [tables[name] for name, of in smk.params.e_tables.items() if of == gt] for gt in kinds}
    rows += greedy_findings({gt: found for gt, found in e_tables.items() if found}, confidence)
    if "table_5_3" in tables:
        rows += quality_findings(tables["table_5_3"], confidence, settings["narrow_k"])
    if "table_loss_matched" in tables:
        rows += loss_matched_findings(tables["table_loss_matched"], confidence)
    if "table_support" in tables:
        rows += support_findings(tables["table_support"], truth, confidence)
    table = findings_table(rows)
    if truth:
        table["ground_truth"] = table["ground_truth"].str.replace(truth, f"{truth} (the truth)", regex=False)
    write_csv(table, smk.output.table)
    with atomic_path(smk.output.page) as tmp:
        tmp.write_text(findings_page(table, confidence))
