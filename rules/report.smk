# Tables and figures, named after the thesis.


rule table_3_1:
    input:
        results=expand(RESULTS + "/eval/{model}.json", model=all_models(config)),
        configs=expand(model_path("{model}", "config.json"), model=trained_models(config)),
    output:
        table_path("table_3_1"),
    params:
        ground_truths=ground_truth_models(config),
    log:
        log_path("report", "table_3_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_3_1.py"


rule figure_3_1:
    input:
        logs=expand(model_path("{model}", "train_log.csv"), model=trained_models(config)),
    output:
        png=figure_path("figure_3_1", "png"),
        pdf=figure_path("figure_3_1", "pdf"),
    params:
        models=trained_models(config),
    log:
        log_path("report", "figure_3_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_3_1.py"


rule metrics_table:
    input:
        unpack(metrics_table_inputs),
    output:
        table_path("{table}"),
    wildcard_constraints:
        table="|".join(metrics_tables()),
    params:
        pairs=metric_pairs(),
        models=bottleneck_models(config),
        methods=config["decoding"]["methods"],
        e_tables=e_tables(),
        tbat_tables=tbat_tables(),
    log:
        log_path("report", "{table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/metrics_table.py"


rule figure_4_1:
    input:
        prompts=data_path("prompts.parquet"),
        logits=[logits_path(m) for m in all_models(config)],
    output:
        **figure_outputs("figure_4_1"),
    params:
        models=all_models(config),
        ground_truths=ground_truth_models(config),
        figures={k: config["figures"][k] for k in ("prompt", "position", "top_bytes")},
        metrics={k: config["metrics"][k] for k in ("tau", "kl_epsilon")},
    log:
        log_path("report", "figure_4_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_4_1.py"


rule figure_4_2:
    input:
        metrics=[metrics_path(m, ground_truth_models(config)[0]) for m in extreme_bottlenecks(config)],
    output:
        **figure_outputs("figure_4_2"),
    params:
        models=extreme_bottlenecks(config),
        ground_truth=ground_truth_models(config)[0],
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
        **figure_outputs("figure_4_3"),
    params:
        models=all_models(config),
    log:
        log_path("report", "figure_4_3"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_4_3.py"


rule table_b:
    input:
        [RESULTS + f"/unargmaxable/{m}.json" for m in bottleneck_models(config)],
    output:
        table_path("table_b"),
    log:
        log_path("report", "table_b"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_b.py"


rule table_i_1:
    input:
        [RESULTS + f"/timing/{m}.csv" for m in bottleneck_models(config)],
    output:
        table_path("table_i_1"),
    params:
        models=bottleneck_models(config),
    log:
        log_path("report", "table_i_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/table_i_1.py"


rule quality_table:
    input:
        [f"{RESULTS}/quality/{m}.summary.csv" for m in [*all_models(config), "human"]],
    output:
        table_path("{quality_table}"),
    wildcard_constraints:
        quality_table="|".join(QUALITY_TABLES),
    params:
        models=all_models(config),
        methods=lambda w: [m for m in QUALITY_TABLES[w.quality_table] if m in config["decoding"]["methods"]],
    log:
        log_path("report", "{quality_table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/quality_table.py"


rule sample_table:
    input:
        samples=[f"{RESULTS}/samples/{m}.parquet" for m in all_models(config)],
        prompts=data_path("prompts.parquet"),
    output:
        RESULTS + "/tables/{sample_table}.md",
    wildcard_constraints:
        sample_table="|".join(SAMPLE_TABLES),
    params:
        models=all_models(config),
        shown=lambda w: all_models(config) if w.sample_table == "samples_appendix_g" else nearest_models(bottleneck_models(config)),
        methods=lambda w: [m for m in SAMPLE_TABLES[w.sample_table] if m in config["decoding"]["methods"]],
        prompt=config["figures"]["sample_prompt"],
        n_prompts=config["sampling"]["n_prompts"],
    log:
        log_path("report", "{sample_table}"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/sample_table.py"


rule figure_5_1:
    input:
        samples=[f"{RESULTS}/samples/{m}.parquet" for m in all_models(config)],
        prompts=data_path("prompts.parquet"),
    output:
        **figure_outputs("figure_5_1"),
    params:
        models=all_models(config),
        n_prompts=config["sampling"]["n_prompts"],
    log:
        log_path("report", "figure_5_1"),
    conda:
        "../envs/report.yaml"
    script:
        "../workflow/scripts/figure_5_1.py"
