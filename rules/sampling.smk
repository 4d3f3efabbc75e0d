# Sampling (thesis ch. 5, §6.2): every model continues the sampling prompts with every decoding method.
# A GPU rule at thesis scale (resources.inference_gpus).


# A byte-level model continues the sampling prompts' byte prefixes; a token-track model (a rank-k head, or tok-full)
# continues the token prompts with its head on its frozen source's states, and joins its BAT-sampling jobs' rows.
rule sample:
    input:
        unpack(sample_inputs),
    output:
        samples_path("{model}"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint", "mos", "svd", "ground_truth", "token_head", "token_reference"),
    params:
        **library_code("sample"),
        sampling=lambda w: sampling_settings(w.model),
        decoding=lambda w: sampling_decoding_for(w.model),
        bat=lambda w: bat_tolerances(sampling_decoding_for(w.model)["methods"]),
        seed=config["seed"],
        ground_truth=lambda w: loaded_ground_truth(w.model),
        truth_decoding=lambda w: truth_decoding_of(w.model),
        document_context=lambda w: scored_by_truth(w.model),  # then sampled in the truth's context
        methods=lambda w: token_methods(config) if is_token_model(w.model) else None,  # the joined rows' order
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("inference"),
    log:
        log_path("samples", "{model}"),
    benchmark:
        benchmark_path("samples", "{model}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/sample.py"


# BAT sampling on a token-track head (its two forms, BA-epsilon and BA-eta): one CPU job per head and method, its
# runtime from its estimate; the head's sample job joins its rows.
rule sample_bat:
    input:
        unpack(token_sample_inputs),
    output:
        bat_samples_path("{model}", "{method}"),
    wildcard_constraints:
        model=pattern("token_head", "token_reference"),
        method="|".join(HEAD_METHODS),
    params:
        **library_code("sample"),
        sampling=lambda w: {k: v for k, v in sampling_settings(w.model).items() if k != "methods"},  # its own method
        decoding=lambda w: sampling_decoding_for(w.model, [w.method]),
        bat=bat_tolerances(HEAD_METHODS),
        seed=config["seed"],
    threads: config["resources"]["metrics_threads"]
    resources:
        **bat_sampling_resources(),
    log:
        log_path("samples", "{model}.{method}"),
    benchmark:
        benchmark_path("samples", "{model}.{method}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/sample.py"


rule quality:
    input:
        unpack(quality_inputs),
    output:
        per_sample=quality_path("{model}"),
        summary=quality_path("{model}", "summary"),
    wildcard_constraints:
        model=pattern(
            "bottleneck", "mos", "svd", "ground_truth", "human", "token_head", "token_reference", "token_human"
        ),
    params:
        **library_code("quality"),
        quality=config["quality"],
        n_prompts=lambda w: None if is_token_model(w.model) else config["sampling"]["n_prompts"],
        bootstrap={k: config["metrics"][k] for k in ("bootstrap", "confidence")},
        seed=config["seed"],
        truth=lambda w: None if is_token_model(w.model) else truth_model(),
        truth_ground_truth=lambda w: None if is_token_model(w.model) else truth_entry(),
        truth_decoding=lambda w: None if is_token_model(w.model) else truth_decoding(),
    threads: config["resources"]["metrics_threads"]
    resources:
        **job_resources("cpu"),
    log:
        log_path("quality", "{model}"),
    benchmark:
        benchmark_path("quality", "{model}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/quality.py"
