# Oversmoothing metrics (thesis §4.1, §6.1): each bottlenecked model against each ground truth (a token-track head
# against its source's full head), after each decoding transform. A CPU rule.


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
    if model.startswith("svd-r"):
        return {**config["decoding"], "methods": config["svd"]["decoding"]}
    return config["decoding"]


rule oversmoothing_metrics:
    input:
        unpack(metrics_inputs),
    output:
        positions=metrics_path("{model}", "{gt}"),
        summary=metrics_path("{model}", "{gt}", "summary"),
    wildcard_constraints:
        model=pattern("bottleneck", "checkpoint", "mos", "svd", "token_head"),
        gt=pattern("ground_truth", "token_reference"),
    params:
        **library_code("oversmoothing_metrics"),
        metrics=config["metrics"],
        chunk=lambda w: config["tokens"]["metrics_batch_size"] if is_token_model(w.model) else None,
        decoding=lambda w: decoding_for(w.model),
        seed=config["seed"],
    threads: config["resources"]["metrics_threads"]
    resources:
        **job_resources("cpu"),
    log:
        log_path("metrics", "{model}__{gt}"),
    benchmark:
        benchmark_path("metrics", "{model}__{gt}")
    conda:
        "../envs/torch.yaml"
    script:
        "../workflow/scripts/oversmoothing_metrics.py"
