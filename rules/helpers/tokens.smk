# The token track's helpers (rules/tokens.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def token_states_inputs(wildcards):
    text = shard_inputs(shards={"shard": "train"}) if wildcards.split == "train" else {"prompts": data_path("prompts.parquet")}
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
