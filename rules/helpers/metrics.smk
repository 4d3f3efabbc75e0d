# The metrics stage's helpers (rules/metrics.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def metrics_inputs(wildcards):
    """Two logits files; for a token-track head, the cached evaluation states, its factors and the source LM."""
    if not is_token_model(wildcards.model):
        return {"model": logits_path(wildcards.model), "ground_truth": logits_path(wildcards.gt)}
    if wildcards.gt != TOKEN_REFERENCE:
        raise ValueError(f"{wildcards.model} is a token-track head: it is measured against {TOKEN_REFERENCE} only")
    return {"states": token_states_path("eval"), "head": token_head_path(wildcards.model), "lm": token_source_input()}


def decoding_for(model):
    """The decoding settings a model is sampled and measured with: every method in `decoding.methods`, or for an
    SVD-imposed head only `svd.decoding` (thesis Tables 7.1, 7.2 and H.1 use pure sampling)."""
    methods = config["svd"]["decoding"] if model.startswith("svd-r") else None
    return decoding_settings(config["decoding"], methods)  # the parameters of these methods alone
