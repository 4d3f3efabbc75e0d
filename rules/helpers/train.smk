# The train stage's helpers (rules/train.smk): its input functions and the settings its rules pass on.
# Snakemake keeps functions and rules in separate files (snakemake --lint).


def training_params(model):
    """`params.settings` of a training job: its model and train settings, less those that decide only how it runs
    (threads, iterations per job)."""
    settings = training_settings(config, model)
    return {**settings, "train": settings_without_threads(settings["train"])}


def training_inputs(model, until=None):
    """A training job's inputs: the shards, and the state of the segment before it (none for the first job).
    `until`: the end of a segment job; None for the job that finishes the training."""
    ends = segment_ends(training_settings(config, model)["train"])
    before = [end for end in ends if until is None or end < until]
    if until is not None and until not in ends:
        raise ValueError(f"{model}: no training segment ends at iteration {until} (ends: {ends})")
    inputs = shard_inputs(lambda name: corpus_file(model, name))
    return {**inputs, "previous": segment_path(model, before[-1])} if before else inputs


def corpus_file(model, name):
    """A file of the corpus a model trains on: its ground truth's own (a teacher's) if it has one, else the config's."""
    gt = ground_truth(config, model) if model.startswith("gt-") else {}
    return corpus_path(model, name) if gt.get("corpus") else data_path(name)


def evaluation_inputs(wildcards):
    """The evaluation pool, and the checkpoint of a model trained here."""
    return {"eval_docs": data_path("eval_docs.parquet"), **checkpoint_input(wildcards.model)}
