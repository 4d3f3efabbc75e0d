# Helpers shared by the rules: output locations and the list of final targets.
import glob as _glob

RESULTS = "results"


def data_path(name):
    """A file of the data stage."""
    return f"{RESULTS}/data/{name}"


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
    ]
