# Tables and figures, named after the thesis. They read small summaries, so they run on the submit host
# (localrules), never as cluster jobs.


localrules:
    all,
    table_3_1,
    training_figure,
    metrics_table,
    position_figure,
    figure_4_2,
    figure_4_3,
    figure_token_heads,
    figure_token_quality,
    table_b,
    table_i_1,
    quality_table,
    sample_table,
    figure_5_1,
    table_7_3,
    table_godey_anisotropy,
    loss_matched,


rule table_3_1:
    input:
        results=expand(eval_path("{model}"), model=all_models(config)),
        configs=expand(model_path("{model}", "config.json"), model=trained_models(config)),
    output:
        reported(table_path("table_3_1"), "table_3_1", REPORT_MODELS),
    params:
        **library_code("table_3_1"),
        ground_truths=ground_truth_models(config),
    log:
        log_path("report", "table_3_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_3_1.py"


rule training_figure:
    input:
        logs=expand(model_path("{model}", "train_log.csv"), model=trained_models(config)),
    output:
        png=reported(figure_path("{figure}", "png"), "training_figure", REPORT_MODELS),
        pdf=figure_path("{figure}", "pdf"),
    wildcard_constraints:
        figure="figure_3_1|figure_godey_singular_entropy",
    params:
        **library_code("training_figure"),
        models=trained_models(config),
    log:
        log_path("report", "{figure}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/training_figure.py"


rule metrics_table:
    input:
        unpack(metrics_table_inputs),
    output:
        reported(table_path("{table}"), "metrics_table", REPORT_OVERSMOOTHING),
    wildcard_constraints:
        table="|".join(metrics_tables()),
    params:
        **library_code("metrics_table"),
        pairs=lambda w: metric_pairs(metrics_table_models(w)),
        models=metrics_table_models,
        tbat_models=lambda w: tbat_models(w.table),
        methods=config["decoding"]["methods"],
        e_tables=e_tables(),
        tbat_tables=tbat_tables(),
        token_suffix=TOKEN_TABLE_SUFFIX,
    log:
        log_path("report", "{table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/metrics_table.py"


rule position_figure:
    input:
        prompts=data_path("prompts.parquet"),
        logits=lambda w: [logits_path(m) for m in position_figure_models(w)],
    output:
        png=reported(figure_path("{figure}", "png"), "position_figure", REPORT_OVERSMOOTHING),
        pdf=figure_path("{figure}", "pdf"),
    wildcard_constraints:
        figure="figure_4_1|figure_7_1",
    params:
        **library_code("position_figure"),
        models=position_figure_models,
        ground_truths=ground_truth_models(config),
        figures={k: config["figures"][k] for k in ("prompt", "position", "top_bytes")},
        metrics={k: config["metrics"][k] for k in ("tau", "kl_epsilon")},
    log:
        log_path("report", "{figure}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/position_figure.py"


rule figure_4_2:
    input:
        metrics=[metrics_path(m, gt) for gt in ground_truth_models(config) for m in extreme_bottlenecks(config)],
    output:
        **figure_outputs("figure_4_2", REPORT_OVERSMOOTHING),
    params:
        **library_code("figure_4_2"),
        models=extreme_bottlenecks(config),
        ground_truths=ground_truth_models(config),
    log:
        log_path("report", "figure_4_2"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_4_2.py"


rule figure_4_3:
    input:
        logits=[logits_path(m) for m in all_models(config)],
    output:
        **figure_outputs("figure_4_3", REPORT_OVERSMOOTHING),
    params:
        **library_code("figure_4_3"),
        models=all_models(config),
    log:
        log_path("report", "figure_4_3"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_4_3.py"


rule figure_token_heads:
    input:
        summaries=[metrics_path(m, gt, "summary") for m, gt in metric_pairs(token_head_models(config))],
    output:
        **figure_outputs("figure_token_heads", REPORT_RANK),
    params:
        **library_code("figure_token_heads"),
        pairs=metric_pairs(token_head_models(config)),
        models=token_head_models(config),
    log:
        log_path("report", "figure_token_heads"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_token_heads.py"


rule figure_token_quality:
    input:
        summaries=[quality_path(m, "summary") for m in token_sampled_models(config)],
        human=quality_path(TOKEN_HUMAN, "summary"),
    output:
        **figure_outputs("figure_token_quality", REPORT_QUALITY),
    params:
        **library_code("figure_token_quality"),
    log:
        log_path("report", "figure_token_quality"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_token_quality.py"


rule table_b:
    input:
        unpack(unargmaxable_table_inputs),
    output:
        reported(table_path("{unargmaxable_table}"), "table_b", REPORT_EXACT),
    wildcard_constraints:
        unargmaxable_table="|".join(unargmaxable_tables()),
    params:
        **library_code("table_b"),
    log:
        log_path("report", "{unargmaxable_table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_b.py"


rule table_i_1:
    input:
        [timing_path(m) for m in main_bottleneck_models(config)],  # speed does not depend on the seed
    output:
        reported(table_path("table_i_1"), "table_i_1", REPORT_EXACT),
    params:
        **library_code("table_i_1"),
        models=main_bottleneck_models(config),
    log:
        log_path("report", "table_i_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_i_1.py"


rule quality_table:
    input:
        lambda w: [quality_path(m, "summary") for m in [*quality_table_models(w), human_of(w.quality_table)]],
    output:
        reported(table_path("{quality_table}"), "quality_table", REPORT_QUALITY),
    wildcard_constraints:
        quality_table="|".join(quality_tables()),
    params:
        **library_code("quality_table"),
        models=quality_table_models,
        methods=lambda w: quality_tables()[w.quality_table],
    log:
        log_path("report", "{quality_table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/quality_table.py"


rule sample_table:
    input:
        samples=lambda w: [samples_path(m) for m in sample_table_models(w)],
        prompts=lambda w: prompts_of(human_of(w.sample_table)),
    output:
        reported(result_path("tables", "{sample_table}.md"), "sample_table", REPORT_QUALITY),
    wildcard_constraints:
        sample_table="|".join(sample_tables()),
    params:
        **library_code("sample_table"),
        shown=sample_table_shown,
        methods=lambda w: sample_tables()[w.sample_table],
        title=lambda w: sample_table_title(w.sample_table),
        prompt=lambda w: None if is_token_model(human_of(w.sample_table)) else config["figures"]["sample_prompt"],
        n_prompts=lambda w: None if is_token_model(human_of(w.sample_table)) else config["sampling"]["n_prompts"],
    log:
        log_path("report", "{sample_table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/sample_table.py"


rule figure_5_1:
    input:
        samples=[samples_path(m) for m in sampled_models(config)],
        prompts=data_path("prompts.parquet"),
    output:
        **figure_outputs("figure_5_1", REPORT_QUALITY),
    params:
        **library_code("figure_5_1"),
        models=sampled_models(config),
        n_prompts=config["sampling"]["n_prompts"],
    log:
        log_path("report", "figure_5_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_5_1.py"


rule table_7_3:
    input:
        [rank_path(m, "effective_rank") for m in linear_head_models(config)],
    output:
        reported(table_path("table_7_3"), "table_7_3", REPORT_RANK),
    params:
        **library_code("table_7_3"),
        models=linear_head_models(config),
    log:
        log_path("report", "table_7_3"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_7_3.py"


rule table_godey_anisotropy:
    input:
        [rank_path(m, "anisotropy") for m in trained_models(config)],
    output:
        table=reported(table_path("table_godey_anisotropy"), "table_godey_anisotropy", REPORT_RANK),
        **figure_outputs("figure_godey_anisotropy", REPORT_RANK),
    params:
        **library_code("table_godey_anisotropy"),
        models=trained_models(config),
    log:
        log_path("report", "table_godey_anisotropy"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_godey_anisotropy.py"


rule loss_matched:
    input:
        unpack(loss_matched_inputs),
    output:
        table=reported(table_path("table_loss_matched"), "table_loss_matched", REPORT_OVERSMOOTHING),
        **figure_outputs("figure_loss_matched", REPORT_OVERSMOOTHING),
    params:
        **library_code("loss_matched"),
        models=main_bottleneck_models(config),
        points=training_points_models(),
        pairs=metric_pairs(training_points_models()),
        loss_levels=config["checkpoints"]["loss_levels"],
    log:
        log_path("report", "loss_matched"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/loss_matched.py"
