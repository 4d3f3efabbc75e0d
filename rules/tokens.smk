# The token track (thesis ch. 8's future work; Godey et al. 2024): rank-k heads tok-<kind>-r<k> on a frozen
# token-level source LM (`tokens.source`), measured against its own full head tok-full. Its prompts, the source's
# cached head inputs and the heads are built here; its logits-free metrics, TBAT, samples and quality run through
# the byte track's rules (metrics, tbat, sampling), its tables and figures through the report's.


def token_states_inputs(wildcards):
    text = {"shard": data_path("train.bin")} if wildcards.split == "train" else {"prompts": data_path("prompts.parquet")}
    return {"lm": token_source_input(), **text}


def token_states_settings(wildcards):
    """What a states file depends on: the source, and for the training states how many tokens in which blocks."""
    tokens = config["tokens"]
    settings = {"source": tokens["source"]}
    if wildcards.split == "train":
        settings.update({k: tokens[k] for k in ("fit_tokens", "block", "batch_size")})
    return settings


def token_head_settings(wildcards):
    """What a head depends on: its kind and rank, the source, and for a learned head its fit and the seed."""
    kind, rank = token_head_parts(wildcards.model)
    tokens = config["tokens"]
    settings = {"kind": kind, "rank": rank, "source": tokens["source"]}
    if kind == "learned":
        settings.update({k: tokens[k] for k in ("fit_iters", "fit_batch_size", "learning_rate")}, seed=config["seed"])
    return settings


def token_head_inputs(wildcards):
    states = {"states": token_states_path("train")} if token_head_parts(wildcards.model)[0] == "learned" else {}
    return {"lm": token_source_input(), **states}


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
    resources:
        **job_resources("cpu"),
    log:
        log_path("tokens", "prompts"),
    conda:
        "../envs/torch.yaml"
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
    resources:
        **job_resources("head"),
    log:
        log_path("train", "{model}"),
    benchmark:
        benchmark_path("train", "{model}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/token_head.py"
