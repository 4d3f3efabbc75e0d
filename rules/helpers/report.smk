# The report stage's helpers (rules/report.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def e_tables():
    """Appendix E tables: name -> (ground truth, decoding methods)."""
    return e_table_names(ground_truth_models(config), measured_methods(config))


def truncation_tables():
    """The truncation samplers' appendix-E tables: name -> (ground truth, decoding methods)."""
    return truncation_table_names(ground_truth_models(config), measured_methods(config))


def tbat_tables():
    """The TBAT tables (appendix E's and the truncation samplers'): name -> decoding methods."""
    return tbat_table_names(measured_methods(config))


def tbat_models(table):
    """The models whose TBAT a metrics table shows (Table 4.1's columns, E.7, E.8): the bottlenecks, or for the
    token track's versions its heads at `tokens.tbat_ranks` among the table's rows (tok-full: E.7, E.8 only)."""
    if table.endswith(TOKEN_SUFFIX):
        return [m for m in token_heads_at(config, "tbat_ranks") if m in rows_of(table)]
    return bottleneck_models(config)


def metrics_table_inputs(wildcards):
    """The metric summaries of the table's rows, and TBAT's summaries where it reads them (Table 4.1, E.7, E.8 and
    their token versions)."""
    reads, inputs = output(config, wildcards.table).reads, {}
    if "metrics" in reads:
        inputs["summaries"] = [metrics_path(m, gt, "summary") for m, gt in metric_pairs(rows_of(wildcards.table))]
    if "tbat" in reads and tbat_models(wildcards.table):
        inputs["tbat"] = [tbat_path(m, "summary") for m in tbat_models(wildcards.table)]
    return inputs


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
