# The rank stage's helpers (rules/rank.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def scratch_ranks():
    """The SVD ranks at which a bottleneck was also trained from scratch (`bn-<r>` in the family)."""
    return [k for k in config["svd"]["ranks"] if k in config["bottlenecks"]]


def rank_constrained_inputs(wildcards):
    """The source model, the shards, and each bottleneck trained from scratch at one of the SVD ranks."""
    return {
        "source": model_path(svd_source(config), "best.pt"),
        **shard_inputs(),
        "scratch": [model_path(f"bn-{k}", "best.pt") for k in scratch_ranks()],
    }
