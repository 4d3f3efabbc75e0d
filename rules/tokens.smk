# The token track (thesis ch. 8's future work; Godey et al. 2024): rank-k heads tok-<kind>-r<k> on a frozen
# token-level source LM (`tokens.source`), measured against its own full head tok-full. Its prompts, the source's
# cached head inputs and the heads are built here; its logits-free metrics, TBAT, samples and quality run through
# the byte track's rules (metrics, tbat, sampling), its tables and figures through the report's.


# The token track's prompts: spans of the evaluation pool cut at whole tokens of its source's tokenizer.
rule token_prompts:
    input:
        eval_docs=data_path("eval_docs.parquet"),
        lm=token_source_input(),
    output:
        token_prompts_path(),
    params:
        **library_code("token_prompts"),
        sampling={k: v for k, v in config["tokens"]["sampling"].items() if k not in ("methods", "batch_size")},
        source=config["tokens"]["source"],
        seed=config["seed"],
    priority: PRIORITY_PROMPTS
    resources:
        **job_resources("cpu"),
    log:
        log_path("tokens", "prompts"),
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/token_prompts.py"


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
    priority: PRIORITY_TRAINING
    resources:
        **job_resources("inference"),
    log:
        log_path("tokens", "states_{split}"),
    benchmark:
        benchmark_path("tokens", "states_{split}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/token_states.py"


rule token_head:
    input:
        unpack(token_head_inputs),
    output:
        token_head_path("{model}"),
    wildcard_constraints:
        model=pattern("token_head"),
    params:
        **library_code("token_head"),
        settings=token_head_settings,
    threads: config["train"]["threads"]
    priority: PRIORITY_TRAINING
    resources:
        **job_resources("head"),
    log:
        log_path("train", "{model}"),
    benchmark:
        benchmark_path("train", "{model}")
    conda:
        "../envs/oversmooth.yaml"
    script:
        "../workflow/scripts/token_head.py"
