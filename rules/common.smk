# Helpers shared by the rules: output locations and the list of final targets.
import glob as _glob

from oversmooth.catalog import (
    all_models,
    ground_truth,
    ground_truth_models,
    trained_models,
    training_settings,
)

RESULTS = "results"


def data_path(name):
    """A file of the data stage."""
    return f"{RESULTS}/data/{name}"


def model_path(model, name):
    """A file of one model's folder."""
    return f"{RESULTS}/models/{model}/{name}"


def table_path(name):
    return f"{RESULTS}/tables/{name}.csv"


def figure_path(name, ext):
    return f"{RESULTS}/figures/{name}.{ext}"


def hf_ground_truth(model):
    """The config entry of an `hf` ground truth, None for models trained here."""
    if model.startswith("gt-"):
        gt = ground_truth(config, model)
        if gt["kind"] == "hf":
            return gt
    return None


def evaluation_inputs(wildcards):
    """The evaluation pool, and the checkpoint of a model trained here."""
    inputs = {"eval_docs": data_path("eval_docs.parquet")}
    if hf_ground_truth(wildcards.model) is None:
        inputs["checkpoint"] = model_path(wildcards.model, "best.pt")
    return inputs


def log_path(stage, name):
    return f"{RESULTS}/logs/{stage}/{name}.log"


def benchmark_path(stage, name):
    return f"{RESULTS}/benchmarks/{stage}/{name}.tsv"


def local_source_files(wildcards=None):
    """Local files read by `files` sources, so that editing one of them reruns the data stage."""
    files = []
    for source in config["data"]["sources"]:
        if source["kind"] == "files":
            for pattern in source["paths"]:
                files.extend(sorted(_glob.glob(pattern, recursive=True)))
    return files


def all_targets():
    """Everything `rule all` builds: each stage adds its final outputs here."""
    return [
        data_path("manifest.json"),
        data_path("prompts.parquet"),
        table_path("table_3_1"),
        figure_path("figure_3_1", "png"),
        figure_path("figure_3_1", "pdf"),
    ]
