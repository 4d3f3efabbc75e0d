# Tables and figures, named after the thesis. They read small summaries, so they run on the submit host
# (localrules), never as cluster jobs.


localrules:
    all,
    findings,
    token_findings,
    table_3_1,
    training_figure,
    metrics_table,
    position_figure,
    figure_4_2,
    figure_4_3,
    figure_token_heads,
    figure_token_quality,
    figure_token_bottleneck,
    table_b,
    table_i_1,
    quality_table,
    sample_table,
    figure_5_1,
    table_7_3,
    table_godey_anisotropy,
    figure_godey_anisotropy,
    figure_godey_rank_loss,
    loss_matched,
    figure_loss_matched,
    table_support,
    figure_support,


rule table_3_1:
    input:
        results=expand(eval_path("{model}"), model=rows_of("table_3_1")),
        configs=expand(model_path("{model}", "config.json"), model=trained_models(config)),
    output:
        output_files("table_3_1"),
    params:
        **library_code("table_3_1"),
        ground_truths=ground_truth_models(config),
    log:
        log_path("report", "table_3_1"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_3_1.py"


rule training_figure:
    input:
        logs=lambda w: [model_path(m, "train_log.csv") for m in rows_of(w.figure)],
    output:
        png=rule_reported(figure_path("{figure}", "png"), "training_figure"),
        pdf=figure_path("{figure}", "pdf"),
    wildcard_constraints:
        figure=built_by("training_figure"),
    params:
        **library_code("training_figure"),
        models=lambda w: rows_of(w.figure),
    log:
        log_path("report", "{figure}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/training_figure.py"


rule metrics_table:
    input:
        unpack(metrics_table_inputs),
    output:
        rule_reported(table_path("{table}"), "metrics_table"),
    wildcard_constraints:
        table=built_by("metrics_table"),
    params:
        **library_code("metrics_table"),
        builder=lambda w: metrics_table_builder(w.table),
        pairs=lambda w: summary_pairs(w.table),
        models=lambda w: rows_of(w.table),
        tbat_models=lambda w: tbat_models(w.table),
        methods=lambda w: methods_of(w.table),
        ground_truth=lambda w: appendix_e_ground_truth(w.table),
        token_suffix=TOKEN_SUFFIX,  # the report's caption tells the token track's tables by it
    log:
        log_path("report", "{table}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/metrics_table.py"


rule position_figure:
    input:
        prompts=data_path("prompts.parquet"),
        logits=lambda w: [logits_path(m) for m in rows_of(w.figure)],
    output:
        png=rule_reported(figure_path("{figure}", "png"), "position_figure"),
        pdf=figure_path("{figure}", "pdf"),
    wildcard_constraints:
        figure=built_by("position_figure"),
    params:
        **library_code("position_figure"),
        models=lambda w: rows_of(w.figure),
        ground_truths=ground_truth_models(config),
        figures={k: config["figures"][k] for k in ("prompt", "position", "top_bytes")},
        metrics={k: config["metrics"][k] for k in ("tau", "kl_epsilon")},
    log:
        log_path("report", "{figure}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/position_figure.py"


rule figure_4_2:
    input:
        metrics=[metrics_path(m, gt) for gt in ground_truth_models(config) for m in rows_of("figure_4_2")],
    output:
        **output_files("figure_4_2"),
    params:
        **library_code("figure_4_2"),
        models=rows_of("figure_4_2"),
        ground_truths=ground_truth_models(config),
    log:
        log_path("report", "figure_4_2"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_4_2.py"


rule figure_4_3:
    input:
        logits=[logits_path(m) for m in rows_of("figure_4_3")],
    output:
        **output_files("figure_4_3"),
    params:
        **library_code("figure_4_3"),
        models=rows_of("figure_4_3"),
    log:
        log_path("report", "figure_4_3"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_4_3.py"


rule figure_token_heads:
    input:
        summaries=[metrics_path(m, gt, "summary") for m, gt in metric_pairs(rows_of("figure_token_heads"))],
    output:
        **output_files("figure_token_heads"),
    params:
        **library_code("figure_token_heads"),
        pairs=metric_pairs(rows_of("figure_token_heads")),
        models=rows_of("figure_token_heads"),
    log:
        log_path("report", "figure_token_heads"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_token_heads.py"


rule figure_token_quality:
    input:
        summaries=[quality_path(m, "summary") for m in rows_of("figure_token_quality")],
        human=quality_path(TOKEN_HUMAN, "summary"),
    output:
        **output_files("figure_token_quality"),
    params:
        **library_code("figure_token_quality"),
    log:
        log_path("report", "figure_token_quality"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_token_quality.py"


rule figure_token_bottleneck:
    input:
        unpack(token_analysis_tables),
    output:
        **output_files("figure_token_bottleneck"),
    params:
        **library_code("figure_token_bottleneck"),
    log:
        log_path("report", "figure_token_bottleneck"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_token_bottleneck.py"


rule table_b:
    input:
        unpack(unargmaxable_table_inputs),
    output:
        rule_reported(table_path("{unargmaxable_table}"), "table_b"),
    wildcard_constraints:
        unargmaxable_table=built_by("table_b"),
    params:
        **library_code("table_b"),
    log:
        log_path("report", "{unargmaxable_table}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_b.py"


rule table_i_1:
    input:
        [timing_path(m) for m in rows_of("table_i_1")],  # speed does not depend on the seed
    output:
        output_files("table_i_1"),
    params:
        **library_code("table_i_1"),
        models=rows_of("table_i_1"),
    log:
        log_path("report", "table_i_1"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_i_1.py"


rule quality_table:
    input:
        lambda w: [quality_path(m, "summary") for m in [*rows_of(w.quality_table), human_of(w.quality_table)]],
    output:
        rule_reported(table_path("{quality_table}"), "quality_table"),
    wildcard_constraints:
        quality_table=built_by("quality_table"),
    params:
        **library_code("quality_table"),
        models=lambda w: rows_of(w.quality_table),
        methods=lambda w: methods_of(w.quality_table),
    log:
        log_path("report", "{quality_table}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/quality_table.py"


rule sample_table:
    input:
        samples=lambda w: [samples_path(m) for m in sample_table_models(w)],
        prompts=lambda w: prompts_of(human_of(w.sample_table)),
    output:
        rule_reported(result_path("tables", "{sample_table}.md"), "sample_table"),
    wildcard_constraints:
        sample_table=built_by("sample_table"),
    params:
        **library_code("sample_table"),
        shown=lambda w: rows_of(w.sample_table),
        methods=lambda w: methods_of(w.sample_table),
        title=lambda w: sample_table_title(config, w.sample_table),
        prompt=lambda w: None if is_token_model(human_of(w.sample_table)) else config["figures"]["sample_prompt"],
        n_prompts=lambda w: None if is_token_model(human_of(w.sample_table)) else config["sampling"]["n_prompts"],
    log:
        log_path("report", "{sample_table}"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/sample_table.py"


rule figure_5_1:
    input:
        samples=[samples_path(m) for m in rows_of("figure_5_1")],
        prompts=data_path("prompts.parquet"),
    output:
        **output_files("figure_5_1"),
    params:
        **library_code("figure_5_1"),
        models=rows_of("figure_5_1"),
        n_prompts=config["sampling"]["n_prompts"],
    log:
        log_path("report", "figure_5_1"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_5_1.py"


rule table_7_3:
    input:
        [rank_path(m, "effective_rank") for m in rows_of("table_7_3")],
    output:
        output_files("table_7_3"),
    params:
        **library_code("table_7_3"),
        models=rows_of("table_7_3"),
    log:
        log_path("report", "table_7_3"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_7_3.py"


rule table_godey_anisotropy:
    input:
        [rank_path(m, "anisotropy") for m in rows_of("table_godey_anisotropy")],
    output:
        output_files("table_godey_anisotropy"),
    params:
        **library_code("table_godey_anisotropy"),
        models=rows_of("table_godey_anisotropy"),
    log:
        log_path("report", "table_godey_anisotropy"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_godey_anisotropy.py"


rule figure_godey_anisotropy:
    input:
        table_path("table_godey_anisotropy"),
    output:
        **output_files("figure_godey_anisotropy"),
    params:
        **library_code("figure_godey_anisotropy"),
    log:
        log_path("report", "figure_godey_anisotropy"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_godey_anisotropy.py"


rule figure_godey_rank_loss:
    input:
        table_path("table_godey_rank_constrained"),
    output:
        **output_files("figure_godey_rank_loss"),
    params:
        **library_code("figure_godey_rank_loss"),
    log:
        log_path("report", "figure_godey_rank_loss"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_godey_rank_loss.py"


rule loss_matched:
    input:
        unpack(loss_matched_inputs),
    output:
        output_files("table_loss_matched"),
    params:
        **library_code("loss_matched"),
        models=main_bottleneck_models(config),
        points=rows_of("table_loss_matched"),
        pairs=metric_pairs(rows_of("table_loss_matched")),
        loss_levels=config["checkpoints"]["loss_levels"],
    log:
        log_path("report", "loss_matched"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/loss_matched.py"


rule figure_loss_matched:
    input:
        unpack(loss_matched_inputs),
    output:
        **output_files("figure_loss_matched"),
    params:
        **library_code("figure_loss_matched"),
        models=main_bottleneck_models(config),
        points=rows_of("figure_loss_matched"),
        pairs=metric_pairs(rows_of("figure_loss_matched")),
    log:
        log_path("report", "figure_loss_matched"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_loss_matched.py"


# Support recovery: planned only with a truth with known support (rules/metrics.smk, rule support).
rule table_support:
    input:
        summaries=[support_path(m, "summary") for m in support_models(config)],
    output:
        output_files("table_support"),
    params:
        **library_code("table_support"),
        models=support_models(config),
    log:
        log_path("report", "table_support"),
    benchmark:
        benchmark_path("report", "table_support")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/table_support.py"


rule figure_support:
    input:
        table_path("table_support"),
    output:
        **output_files("figure_support"),
    params:
        **library_code("figure_support"),
    log:
        log_path("report", "figure_support"),
    benchmark:
        benchmark_path("report", "figure_support")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/figure_support.py"


# The thesis's claims as tests, decided from the tables (oversmooth.reporting.findings; docs/results.md names
# each test).
rule findings:
    input:
        unpack(findings_inputs),
    output:
        table=output_files("table_findings"),
        page=output_files("findings"),
    params:
        **library_code("findings"),
        ground_truths={gt: ground_truth(config, gt)["kind"] for gt in ground_truth_models(config)},
        truth=truth_model(),
        e_tables={name: gt for name, (gt, _) in e_tables().items()},
        findings=config["findings"],
        confidence=config["metrics"]["confidence"],
    log:
        log_path("report", "table_findings"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/findings.py"


rule token_findings:
    input:
        unpack(token_analysis_tables),
    output:
        table=output_files("table_token_findings"),
        page=output_files("token_findings"),
    params:
        **library_code("token_findings"),
        confidence=config["metrics"]["confidence"],
    log:
        log_path("report", "table_token_findings"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/token_findings.py"
