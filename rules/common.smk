# Helpers shared by the rules: output locations and the list of final targets.
import glob as _glob

from oversmooth.catalog import (
    all_models,
    bottleneck_models,
    extreme_bottlenecks,
    ground_truth,
    ground_truth_models,
    trained_models,
    training_settings,
)
from oversmooth.metrics_report import e_table_names, tbat_table_names
from oversmooth.quality_report import QUALITY_TABLES, SAMPLE_TABLES, nearest_models

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


def checkpoint_input(model):
    """`{"checkpoint": best.pt}` for a model trained here; nothing for an `hf` ground truth."""
    return {} if hf_ground_truth(model) is not None else {"checkpoint": model_path(model, "best.pt")}


def evaluation_inputs(wildcards):
    """The evaluation pool, and the checkpoint of a model trained here."""
    return {"eval_docs": data_path("eval_docs.parquet"), **checkpoint_input(wildcards.model)}


def logits_inputs(wildcards):
    """The evaluation prompts, and the checkpoint of a model trained here."""
    return {"prompts": data_path("prompts.parquet"), **checkpoint_input(wildcards.model)}


def logits_path(model, kind="logits"):
    """`results/logits/<model>.parquet`, or its `.hidden.parquet` companion."""
    suffix = "" if kind == "logits" else f".{kind}"
    return f"{RESULTS}/logits/{model}{suffix}.parquet"


def metrics_path(model, gt, kind="positions"):
    """Per-position metrics of a model against a ground truth, or their `.summary.csv`."""
    base = f"{RESULTS}/metrics/{model}__{gt}"
    return base + (".parquet" if kind == "positions" else ".summary.csv")


def metric_pairs():
    """Every (bottlenecked model, ground truth) pair the metrics compare."""
    return [(m, gt) for m in bottleneck_models(config) for gt in ground_truth_models(config)]


def e_tables():
    """Appendix E tables: name -> (ground truth, decoding methods)."""
    return e_table_names(ground_truth_models(config), config["decoding"]["methods"])


def tbat_tables():
    """Appendix E's TBAT tables: name -> decoding methods."""
    return tbat_table_names(config["decoding"]["methods"])


def tbat_path(model, kind="positions"):
    return f"{RESULTS}/tbat/{model}" + (".parquet" if kind == "positions" else ".summary.csv")


def metrics_tables():
    return ["table_4_1", "table_4_2", "table_6_1", *e_tables(), *tbat_tables(), "table_f_1"]


def metrics_table_inputs(wildcards):
    """Every table reads the metric summaries it pivots; Table 4.1 and E.7/E.8 read TBAT's."""
    inputs = {}
    if wildcards.table not in tbat_tables():
        inputs["summaries"] = [metrics_path(m, gt, "summary") for m, gt in metric_pairs()]
    if wildcards.table == "table_4_1" or wildcards.table in tbat_tables():
        inputs["tbat"] = [tbat_path(m, "summary") for m in bottleneck_models(config)]
    return inputs


def figure_outputs(name):
    return {"png": figure_path(name, "png"), "pdf": figure_path(name, "pdf")}


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
    figures = ["figure_3_1", "figure_4_1", "figure_4_2", "figure_4_3", "figure_5_1"]
    return [
        data_path("manifest.json"),
        data_path("prompts.parquet"),
        table_path("table_3_1"),
        *(table_path(name) for name in metrics_tables()),
        table_path("table_b"),
        table_path("table_i_1"),
        *(table_path(name) for name in QUALITY_TABLES),
        *(f"{RESULTS}/tables/{name}.md" for name in SAMPLE_TABLES),
        *(figure_path(name, ext) for name in figures for ext in ("png", "pdf")),
    ]
