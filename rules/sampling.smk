# Sampling (thesis ch. 5, §6.2): every model continues the sampling prompts with every decoding method.
# A GPU rule at thesis scale (resources.inference_gpus).


rule sample:
    input:
        unpack(logits_inputs),
    output:
        samples_path("{model}"),
    params:
        library=library_code("sample"),
        sampling=config["sampling"],
        decoding=lambda w: decoding_for(w.model),
        seed=config["seed"],
        ground_truth=lambda w: loaded_ground_truth(w.model),
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


rule perplexity_model:
    output:
        perplexity_model_path(),
    params:
        library=library_code("perplexity_model"),
    resources:
        **job_resources("cpu"),
    log:
        log_path("quality", "perplexity_model"),
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/perplexity_model.py"


rule quality:
    input:
        unpack(quality_inputs),
    output:
        per_sample=quality_path("{model}"),
        summary=quality_path("{model}", "summary"),
    wildcard_constraints:
        model=rf"{BOTTLENECK_RUN}|mos-\d+|svd-r\d+|gt-[A-Za-z0-9_.]+|human",
    params:
        library=library_code("quality"),
        quality=config["quality"],
        n_prompts=config["sampling"]["n_prompts"],
        bootstrap={k: config["metrics"][k] for k in ("bootstrap", "confidence")},
        seed=config["seed"],
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
