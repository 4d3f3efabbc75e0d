# Logit extraction: teacher-forced next-byte distributions over every evaluation window (thesis §4.2).
# A GPU rule at thesis scale (resources.inference_gpus).


rule extract_logits:
    input:
        unpack(logits_inputs),
    output:
        logits=logits_path("{model}"),
        hidden=logits_path("{model}", "hidden"),
    params:
        **library_code("extract_logits"),
        settings=config["logits"],
        seed=config["seed"],
        ground_truth=lambda w: loaded_ground_truth(w.model),
        truth_decoding=lambda w: truth_decoding_of(w.model),
    threads: config["resources"]["inference_threads"]
    priority: lambda w: ground_truth_first(w.model)
    resources:
        **job_resources("inference"),
    log:
        log_path("logits", "{model}"),
    benchmark:
        benchmark_path("logits", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/extract_logits.py"
