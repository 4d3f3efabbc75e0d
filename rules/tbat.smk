# TBAT (thesis §4.1.6, appendix D) and unargmaxable classes (appendix B): exact, by linear programming. CPU rules.


# A bottleneck's outputs over 256 bytes, or a token-track head's (or tok-full's) over its whole vocabulary.
rule tbat:
    input:
        unpack(tbat_inputs),
    output:
        positions=tbat_path("{model}"),
        summary=tbat_path("{model}", "summary"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint", "token_head", "token_reference"),
    params:
        **library_code("tbat"),
        tbat=tbat_settings,
        decoding=tbat_decoding,
        bootstrap={k: config["metrics"][k] for k in ("bootstrap", "confidence")},
        seed=config["seed"],
    threads: config["tbat"]["threads"]
    priority: lambda w: PRIORITY_TRAINING if w.model == TOKEN_REFERENCE else 0
    resources:
        **job_resources("cpu"),
    log:
        log_path("tbat", "{model}"),
    benchmark:
        benchmark_path("tbat", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/tbat.py"


# A bottleneck's byte classes (its LayerNorm-ed input, a ball), or a token-track head's (or tok-full's) tokens (every
# direction).
rule unargmaxable:
    input:
        unpack(unargmaxable_inputs),
    output:
        unargmaxable_path("{model}"),
    wildcard_constraints:
        model=pattern("bottleneck", "token_head", "token_reference"),
    params:
        **library_code("unargmaxable"),
        settings=config["unargmaxable"],
        seed=config["seed"],
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("unargmaxable", "{model}"),
    benchmark:
        benchmark_path("unargmaxable", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/unargmaxable.py"


rule time_metrics:
    input:
        model=logits_path("{model}"),
        ground_truth=logits_path(ground_truth_models(config)[0]),
        checkpoint=model_path("{model}", "best.pt"),
    output:
        timing_path("{model}"),
    wildcard_constraints:
        model=pattern("bottleneck"),
    params:
        **library_code("time_metrics"),
        timing=config["timing"],
        tau=config["metrics"]["tau"],
        tbat={k: v for k, v in config["tbat"].items() if k not in ("positions", "threads")},
        seed=config["seed"],
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("timing", "{model}"),
    benchmark:
        benchmark_path("timing", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/time_metrics.py"
