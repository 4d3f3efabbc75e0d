# The logits stage's helpers (rules/logits.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def logits_inputs(wildcards):
    """The evaluation prompts, and the checkpoint of a model trained here."""
    return {"prompts": data_path("prompts.parquet"), **checkpoint_input(wildcards.model)}
