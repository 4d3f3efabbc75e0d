"""Snakemake adapter: one oversmoothing table (4.1, 4.2, 6.1, 7.1, 7.2, E.n, F.1, the truncation samplers'
`table_truncation_<ground truth>` and `_tbat`, and the token track's `<table>_tokens`) from the per-pair and TBAT
summaries. Its params are its own table's (its builder, rows, methods and ground truth), so that a method list
change reruns only the tables that show the method or read what it changed."""

from oversmooth.core.job import workflow_job
from oversmooth.reporting import metrics_report as mr
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    p = smk.params
    summary = mr.load_summaries(dict(zip(map(tuple, p.pairs), smk.input.summaries))) if p.pairs else None
    tbat = mr.load_tbat_summaries(dict(zip(p.tbat_models, smk.input.tbat))) if p.tbat_models else None
    if p.builder == "table_e_tbat":
        table = mr.table_e_tbat(tbat, p.models, p.methods)
    elif p.builder == "table_e":
        table = mr.table_e(summary, p.models, p.ground_truth, p.methods)
    elif p.builder == "table_4_1":
        table = mr.table_4_1(summary, p.models, tbat)  # tbat None: no TBAT columns (the token track)
    elif p.builder == "table_6_1":
        table = mr.table_6_1(summary, p.models, p.methods)
    else:
        tables = {"table_4_2": mr.table_4_2, "table_7_1": mr.table_7_1, "table_7_2": mr.table_7_2,
                  "table_f_1": mr.table_f_1}
        table = tables[p.builder](summary, p.models)
    write_table(table, smk.output[0])
