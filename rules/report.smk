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
