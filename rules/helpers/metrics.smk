# The metrics stage's helpers (rules/metrics.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def metrics_inputs(wildcards):
    """Two logits files, and the model's BA-decoded rows where it has BA methods (`byte_bat_methods`); for a
    token-track head, the cached evaluation states, its factors and the source LM."""
    if not is_token_model(wildcards.model):
        decoded = {"decoded": decoded_path(wildcards.model)} if byte_bat_methods(config, wildcards.model) else {}
        return {"model": logits_path(wildcards.model), "ground_truth": logits_path(wildcards.gt), **decoded}
    if wildcards.gt != TOKEN_REFERENCE:
        raise ValueError(f"{wildcards.model} is a token-track head: it is measured against {TOKEN_REFERENCE} only")
    return {"states": token_states_path("eval"), "head": token_head_path(wildcards.model), "lm": token_source_input()}


def decoding_for(model):
    """The decoding settings a model is measured with: every method in `decoding.methods`, for an SVD-imposed head
    only `svd.decoding` (thesis Tables 7.1, 7.2 and H.1 use pure sampling), for a token-track head `tokens.methods`."""
    methods = None
    if model.startswith("svd-r"):
        methods = config["svd"]["decoding"]
    elif is_token_model(model):
        methods = token_measured_methods(config)
    return decoding_settings(config["decoding"], methods)  # the parameters of these methods alone


def support_path(model, kind="positions"):
    """Per-position support recovery of a model against the truth with known support, or its `.summary.csv` (here,
    not in oversmooth.core.layout, which every script reaches: a path the scripts never build reruns none of them)."""
    return f"{RESULTS}/support/{model}" + (".parquet" if kind == "positions" else ".summary.csv")


def decoded_path(model):
    """A model's BA-decoded rows at `metrics.bat_positions` positions (rule bat_decode; here for the reason
    `support_path` is)."""
    return f"{RESULTS}/decoded/{model}.parquet"


BAT_TOLERANCES = ("zero_tol", "certificate_margin", "feasibility_tol", "rank_tol")  # tbat's, BA sampling's solver


def bat_head(model):
    """Whether `model` has one head matrix W (a softmax of W h) for BA-epsilon and BA-eta: a model trained here
    that is not a mixture of softmaxes."""
    return model in linear_head_models(config)


def bat_tolerances(methods):
    """The BAT solver's tolerances (`tbat`) where `methods` include a BAT sampling method, else None."""
    return {k: config["tbat"][k] for k in BAT_TOLERANCES} if set(methods) & set(HEAD_METHODS) else None


def support_inputs(wildcards):
    """The model's and the truth's logits; the model's checkpoint (its W) where it is BA-decoded."""
    inputs = {"model": logits_path(wildcards.model), "truth": logits_path(support_truth(config))}
    return inputs | ({"checkpoint": model_path(wildcards.model, "best.pt")} if bat_head(wildcards.model) else {})


def support_settings(wildcards):
    """`support` with the BA methods left out of the grid of a model without one head matrix, and the BAT solver's
    tolerances where it has one."""
    grid = {m: v for m, v in config["support"]["grid"].items() if bat_head(wildcards.model) or m not in HEAD_METHODS}
    return {"positions": config["support"]["positions"], "grid": grid, "bat": bat_tolerances(grid)}
