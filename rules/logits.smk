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
    threads: config["resources"]["inference_threads"]
    priority: lambda w: ground_truth_first(w.model)
    resources:
        **job_resources("inference"),
    log:
        log_path("logits", "{model}"),
    benchmark:
        benchmark_path("logits", "{model}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/extract_logits.py"


# The token track's counterpart: every head's logits are h W^T for the states h its source's head reads, so the
# states are extracted once (evaluation prompts; training text for fitting the learned heads) and the logits over
# the whole vocabulary are formed where they are used (tokenheads.py says why).
rule token_states:
    input:
        unpack(token_states_inputs),
    output:
        token_states_path("{split}"),
    wildcard_constraints:
        split="train|eval",
    params:
        **library_code("token_states"),
        settings=token_states_settings,
    threads: config["resources"]["inference_threads"]
    resources:
        **job_resources("inference"),
    log:
        log_path("tokens", "states_{split}"),
    benchmark:
        benchmark_path("tokens", "states_{split}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/token_states.py"
