# The report stage's helpers (rules/report.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def e_tables():
    """Appendix E tables: name -> (ground truth, decoding methods)."""
    return e_table_names(ground_truth_models(config), measured_methods(config))


def truncation_tables():
    """The truncation samplers' appendix-E tables: name -> (ground truth, decoding methods)."""
    return truncation_table_names(ground_truth_models(config), measured_methods(config))


def appendix_e_ground_truth(table):
    """The ground truth of an appendix-E table of one ground truth (E.1-E.6, the truncation samplers'
    `table_truncation_<ground truth>`), else None."""
    return {**e_tables(), **truncation_tables()}.get(table, (None, None))[0]


def metrics_table_builder(table):
    """The `oversmooth.reporting.metrics_report` function that builds a metrics table: `table_e_tbat` for TBAT per
    method (E.7, E.8, the truncation samplers' TBAT table and their token versions), `table_e` for an appendix-E table
    of one ground truth, else the one named after the table (4.1, 4.2, 6.1, 7.1, 7.2, F.1 and their token versions)."""
    if output(config, table).reads == ("tbat",):
        return "table_e_tbat"
    return "table_e" if appendix_e_ground_truth(table) else table.removesuffix(TOKEN_SUFFIX)


def summary_pairs(table):
    """The (model, reference) pairs whose metric summaries a metrics table reads (none for TBAT's tables)."""
    return metric_pairs(rows_of(table)) if "metrics" in output(config, table).reads else []


def tbat_models(table):
    """The models whose TBAT a metrics table reads (Table 4.1's columns, E.7, E.8, the truncation samplers' TBAT
    table): the bottlenecks, or for the token track's versions its heads at `tokens.tbat_ranks` among the table's rows
    (tok-full: E.7, E.8 only); none for a table that reads no TBAT."""
    if "tbat" not in output(config, table).reads:
        return []
    if table.endswith(TOKEN_SUFFIX):
        return [m for m in token_heads_at(config, "tbat_ranks") if m in rows_of(table)]
    return bottleneck_models(config)


def metrics_table_inputs(wildcards):
    """The metric summaries of the table's pairs, and TBAT's summaries where it reads them (Table 4.1, E.7, E.8,
    the truncation samplers' TBAT table and their token versions)."""
    inputs = {"summaries": [metrics_path(m, gt, "summary") for m, gt in summary_pairs(wildcards.table)],
              "tbat": [tbat_path(m, "summary") for m in tbat_models(wildcards.table)]}
    return {name: files for name, files in inputs.items() if files}


def human_of(table):
    """The Human row of a quality or sample table: the token track's human continuations for its tables."""
    return TOKEN_HUMAN if table.endswith(TOKEN_SUFFIX) else "human"


def sample_table_models(wildcards):
    """Every sampled model of the table's track (the inputs of a sample table)."""
    token = wildcards.sample_table.endswith(TOKEN_SUFFIX)
    return token_sampled_models(config) if token else sampled_models(config)


def unargmaxable_table_inputs(wildcards):
    """Table B reads its models' records; its token version also the training states (token frequencies) and the
    source (its tokenizer)."""
    records = {"records": [unargmaxable_path(m) for m in rows_of(wildcards.unargmaxable_table)]}
    if wildcards.unargmaxable_table == "table_b":
        return records
    return {**records, "states": token_states_path("train"), "lm": token_source_input()}


def loss_matched_inputs(wildcards):
    """Each bottleneck's training log and summary (best iteration), and each point's metrics and TBAT summaries."""
    points = rows_of("table_loss_matched")
    return {
        "logs": [model_path(m, "train_log.csv") for m in main_bottleneck_models(config)],
        "configs": [model_path(m, "config.json") for m in main_bottleneck_models(config)],
        "summaries": [metrics_path(m, gt, "summary") for m, gt in metric_pairs(points)],
        "tbat": [tbat_path(m, "summary") for m in points],
    }


def token_analysis_tables(wildcards):
    """The token track's exact analyses, by table name: Tables E.7 and E.8 (TBAT) and B (unargmaxable tokens), those
    the config builds."""
    names = ("table_e_7_tokens", "table_e_8_tokens", "table_b_tokens")
    return {o.name: table_path(o.name) for o in planned_outputs(config) if o.name in names}


def findings_inputs(wildcards):
    """The tables the findings are decided from: Tables 4.1 and appendix E's per ground truth, and Tables 7.1 (SVD
    heads), 5.3 (samples), the loss-matched table (checkpoints) and the support table (a truth with known support)
    where the config builds them."""
    optional = ("table_7_1", "table_5_3", "table_loss_matched", "table_support")
    names = ["table_4_1", *e_tables()] + [n for n in optional if output(config, n).planned]
    return {name: table_path(name) for name in names}
