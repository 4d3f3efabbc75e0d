# Sampling (thesis ch. 5, §6.2): every model continues the sampling prompts with every decoding method.
# A GPU rule at thesis scale (resources.inference_gpus).


# A byte-level model continues the sampling prompts' byte prefixes with every method: rule sample_with_bat where its
# methods hold BAT sampling's (a bottlenecked run, a `nanogpt` ground truth, where decoding.bat_methods is set), rule
# sample where they do not (an SVD head, a mixture of softmaxes, a loaded ground truth). Only sample_with_bat's script
# runs the BAT solver and only its params carry the solver's settings: a change to them reruns no other byte model's
# sampling.
ruleorder: sample_with_bat > sample


rule sample_with_bat:
    input:
        unpack(logits_inputs),
    output:
        samples_path("{model}"),
    wildcard_constraints:
        model=bat_sampled_byte_models(),
    params:
        **library_code("sample_with_bat"),
        **byte_sampling_params(),
        bat=bat_tolerances(HEAD_METHODS),
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("inference"),
    log:
        log_path("samples", "{model}"),
    benchmark:
        benchmark_path("samples", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/sample_with_bat.py"


rule sample:
    input:
        unpack(logits_inputs),
    output:
        samples_path("{model}"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint", "mos", "svd", "ground_truth"),
    params:
        **library_code("sample"),
        **byte_sampling_params(),
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("inference"),
    log:
        log_path("samples", "{model}"),
    benchmark:
        benchmark_path("samples", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/sample.py"


# A token-track model (a rank-k head, or tok-full) continues the token prompts with its head on its frozen source's
# states, with the track's methods but BAT sampling's. Its script runs no BAT code and its params carry no BAT setting:
# a change to BAT sampling's code or settings reruns BAT sampling's jobs (rule sample_bat) and the join, not these.
rule sample_direct:
    input:
        unpack(token_sample_inputs),
    output:
        direct_samples_path("{model}"),
    wildcard_constraints:
        model=pattern("token_head", "token_reference"),
    params:
        **library_code("sample_direct"),
        sampling=lambda w: sampling_settings(w.model),
        decoding=lambda w: sampling_decoding_for(w.model),
        seed=config["seed"],
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("inference"),
    log:
        log_path("samples", "{model}.direct"),
    benchmark:
        benchmark_path("samples", "{model}.direct")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/sample_direct.py"


# BAT sampling on a token-track head (its two forms, BA-epsilon and BA-eta): one CPU job per head and method, its
# runtime from its estimate.
rule sample_bat:
    input:
        unpack(token_sample_inputs),
    output:
        bat_samples_path("{model}", "{method}"),
    wildcard_constraints:
        model=pattern("token_head", "token_reference"),
        method="|".join(HEAD_METHODS),
    params:
        **library_code("sample_bat"),
        sampling=lambda w: sampling_settings(w.model),
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
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/sample_bat.py"


# A token-track model's samples: its direct methods' rows and its BAT-sampling jobs', in the track's order of
# methods (what one job sampling every method would write). Seconds, on the submit host.
rule join_samples:
    input:
        unpack(join_inputs),
    output:
        samples_path("{model}"),
    wildcard_constraints:
        model=pattern("token_head", "token_reference"),
    params:
        **library_code("join_samples"),
        methods=token_methods(config),
    localrule: True
    log:
        log_path("samples", "{model}.join"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/join_samples.py"


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
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/quality.py"
