# Oversmoothing metrics (thesis §4.1, §6.1): each bottlenecked model against each ground truth (a token-track head
# against its source's full head), after each decoding transform. A CPU rule.


rule oversmoothing_metrics:
    input:
        unpack(metrics_inputs),
    output:
        positions=metrics_path("{model}", "{gt}"),
        summary=metrics_path("{model}", "{gt}", "summary"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint", "mos", "svd", "token_head"),
        gt=pattern("ground_truth", "token_reference"),
    params:
        **library_code("oversmoothing_metrics"),
        metrics={k: config["metrics"][k] for k in ("tau", "kl_epsilon", "bootstrap", "confidence")},
        chunk=lambda w: config["tokens"]["metrics_batch_size"] if is_token_model(w.model) else None,
        decoding=lambda w: decoding_for(w.model),
        seed=config["seed"],
    threads: lambda w: config["resources"]["metrics_threads"] if is_token_model(w.model) else 1  # bytes: NumPy, one thread
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("metrics", "{model}__{gt}"),
    benchmark:
        benchmark_path("metrics", "{model}__{gt}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/oversmoothing_metrics.py"


# BA-epsilon and BA-eta (decoding.bat_methods) of a byte model with one head matrix W, at `metrics.bat_positions`
# seeded positions (TBAT's choice of rows): an exact BAT reject set a row, too costly for every evaluation position.
# Its metrics jobs, against every ground truth, read these rows. A CPU rule; the solver reads W without torch.
rule bat_decode:
    input:
        logits=logits_path("{model}"),
        checkpoint=model_path("{model}", "best.pt"),
    output:
        decoded_path("{model}"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint"),
    params:
        **library_code("bat_decode"),
        decoding=lambda w: decoding_settings(config["decoding"], byte_bat_methods(config, w.model)),
        positions=config["metrics"]["bat_positions"],
        bat=bat_tolerances(HEAD_METHODS),
        seed=config["seed"],
    resources:
        **job_resources("cpu", side_by_side=True),
    log:
        log_path("decoded", "{model}"),
    benchmark:
        benchmark_path("decoded", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/bat_decode.py"


# Support recovery: each model against the truth with known support (a teacher writing under a truncating
# decoding), each decoding method over its grid. Only planned where the config has such a truth. A CPU rule; BA-epsilon
# and BA-eta run the exact BAT solver on the model's head (no torch).
rule support:
    input:
        unpack(support_inputs),
    output:
        positions=support_path("{model}"),
        summary=support_path("{model}", "summary"),
    wildcard_constraints:
        model=pattern("bottleneck", "mos", "ground_truth"),
    params:
        **library_code("support"),
        support=support_settings,
        truth=support_truth(config),
        bootstrap={k: config["metrics"][k] for k in ("bootstrap", "confidence")},
        seed=config["seed"],
    resources:
        **job_resources("cpu"),
    log:
        log_path("support", "{model}"),
    benchmark:
        benchmark_path("support", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/support.py"
