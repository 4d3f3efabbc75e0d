# The tbat stage's helpers (rules/tbat.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def token_head_input(model):
    """A token-track head's factors, or for tok-full the source model (its own head)."""
    return {"lm": token_source_input()} if model == TOKEN_REFERENCE else {"head": token_head_path(model)}


def unargmaxable_inputs(wildcards):
    """A bottleneck's checkpoint, or a token-track head's factors (tok-full: its source model)."""
    if is_token_model(wildcards.model):
        return token_head_input(wildcards.model)
    return {"checkpoint": model_path(wildcards.model, "best.pt")}


def tbat_inputs(wildcards):
    """A bottleneck's logits and checkpoint (and its BA-decoded rows where it has BA methods: TBAT after BA-epsilon and
    BA-eta at those rows), or a token-track head's evaluation states and factors."""
    if is_token_model(wildcards.model):
        return {"states": token_states_path("eval"), **token_head_input(wildcards.model)}
    decoded = {"decoded": decoded_path(wildcards.model)} if byte_bat_methods(config, wildcards.model) else {}
    return {"logits": logits_path(wildcards.model), "checkpoint": model_path(wildcards.model, "best.pt"), **decoded}


def tbat_decoding(wildcards):
    """`decoding` with a token-track head's methods (tok-full's `tokens.full_tbat_methods` where set), or a byte
    model's `decoding.methods` (its BA methods come decoded: `tbat_inputs`)."""
    model = wildcards.model
    if is_token_model(model):
        return decoding_settings(config["decoding"], token_tbat_methods(config, model))
    return decoding_settings(config["decoding"], config["decoding"]["methods"])


def tbat_settings(wildcards):
    """`tbat` without its threads; a token-track head's positions are `tokens.tbat_positions` (tok-full's
    `tokens.full_tbat_positions` where set)."""
    settings = settings_without_threads(config["tbat"])
    if is_token_model(wildcards.model):
        settings["positions"] = token_tbat_positions(config, wildcards.model)
    return settings
