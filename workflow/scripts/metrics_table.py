"""Snakemake adapter: one oversmoothing table (4.1, 4.2, 6.1, 7.1, 7.2, E.n, F.1, the truncation samplers'
`table_truncation_<ground truth>` and `_tbat`, and the token track's `<table>_tokens`) from the per-pair and TBAT
summaries."""

from oversmooth.core.job import workflow_job
from oversmooth.reporting import metrics_report as mr
from oversmooth.reporting.seeds import write_table

smk = snakemake  # noqa: F821  (injected by Snakemake)

with workflow_job(smk.log[0]):
    name, models, methods = smk.wildcards.table, smk.params.models, smk.params.methods
    name = name.removesuffix(smk.params.token_suffix)  # the token track's tables are the byte track's, other rows
    summary = mr.load_summaries(dict(zip(map(tuple, smk.params.pairs), smk.input.summaries))) if "summaries" in smk.input.keys() else None
    tbat = mr.load_tbat_summaries(dict(zip(smk.params.tbat_models, smk.input.tbat))) if "tbat" in smk.input.keys() else None
    if name in smk.params.tbat_tables:
        table = mr.table_e_tbat(tbat, models, smk.params.tbat_tables[name])
    elif name in smk.params.e_tables:
        ground_truth, chosen = smk.params.e_tables[name]
        table = mr.table_e(summary, models, ground_truth, chosen)
    elif name == "table_4_1":
        table = mr.table_4_1(summary, models, tbat)  # tbat None: no TBAT columns (the token track)
    elif name == "table_6_1":
        table = mr.table_6_1(summary, models, methods)
    else:
        tables = {"table_4_2": mr.table_4_2, "table_7_1": mr.table_7_1, "table_7_2": mr.table_7_2, "table_f_1": mr.table_f_1}
        table = tables[name](summary, models)
    write_table(table, smk.output[0])
