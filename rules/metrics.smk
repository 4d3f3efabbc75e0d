# Oversmoothing metrics (thesis §4.1, §6.1): each bottlenecked model against each ground truth,
# after each decoding transform. A CPU rule.


rule oversmoothing_metrics:
    input:
        model=logits_path("{model}"),
        ground_truth=logits_path("{gt}"),
    output:
        positions=metrics_path("{model}", "{gt}"),
        summary=metrics_path("{model}", "{gt}", "summary"),
    wildcard_constraints:
        model=rf"{BOTTLENECKED}|mos-\d+|svd-r\d+",
        gt=r"gt-[A-Za-z0-9_.]+",
    params:
        library=library_code("oversmoothing_metrics"),
        metrics=config["metrics"],
        decoding=lambda w: decoding_for(w.model),
        seed=config["seed"],
    threads: config["resources"]["metrics_threads"]
    resources:
        **job_resources("cpu"),
    log:
        log_path("metrics", "{model}__{gt}"),
    benchmark:
        benchmark_path("metrics", "{model}__{gt}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/oversmoothing_metrics.py"
