"""Where the pipeline writes: every file under `results/` by stage, model and kind, and the logs and benchmarks
of the jobs: the paths the rules name their inputs and outputs with."""

from __future__ import annotations

RESULTS = "results"


def data_path(name: str) -> str:
    """A file of the data stage."""
    return f"{RESULTS}/data/{name}"


def corpus_path(model: str, name: str) -> str:
    """A file of a ground truth's own corpus (a teacher's): `results/data/corpus/<model>/<name>`."""
    return data_path(f"corpus/{model}/{name}")


def teacher_documents_path(model: str) -> str:
    """The documents a teacher ground truth sampled (rule teacher_corpus)."""
    return data_path(f"teacher/{model}.parquet")


def model_path(model: str, name: str) -> str:
    """A file of one model's folder."""
    return f"{RESULTS}/models/{model}/{name}"


# A training's log as it goes (oversmooth.models.train), in its model's folder beside train_log.csv, which it becomes
# at the training's end, and the settings its readers need (max_iters, eval_interval, the running job's `until`)
PARTIAL_TRAIN_LOG = "train_log.partial.csv"
PARTIAL_TRAIN_LOG_SETTINGS = "train_log.partial.json"


def result_path(stage: str, name: str) -> str:
    """A file of one stage's folder under results/: `results/<stage>/<name>`."""
    return f"{RESULTS}/{stage}/{name}"


def eval_path(model: str) -> str:
    return result_path("eval", f"{model}.json")


def samples_path(model: str) -> str:
    return result_path("samples", f"{model}.parquet")


def bat_samples_path(model: str, method: str) -> str:
    """A token-track head's samples under one BAT-sampling method (a CPU job of its own), which its samples join."""
    return result_path("samples", f"{model}.{method}.parquet")


def direct_samples_path(model: str) -> str:
    """A token-track model's samples under its methods but BAT sampling's, which its samples join with those."""
    return result_path("samples", f"{model}.direct.parquet")


def quality_path(model: str, kind: str = "per_sample") -> str:
    """Per-sample quality of a model (or `human`), or its `.summary.csv`."""
    return result_path("quality", f"{model}.parquet" if kind == "per_sample" else f"{model}.summary.csv")


def unargmaxable_path(model: str) -> str:
    return result_path("unargmaxable", f"{model}.json")


def timing_path(model: str) -> str:
    return result_path("timing", f"{model}.csv")


def rank_path(model: str, analysis: str) -> str:
    """A rank analysis of one model: `effective_rank` or `anisotropy`."""
    return result_path("rank", f"{model}.{analysis}.csv")


def table_path(name: str) -> str:
    return f"{RESULTS}/tables/{name}.csv"


def figure_path(name: str, ext: str) -> str:
    return f"{RESULTS}/figures/{name}.{ext}"


def logits_path(model: str, kind: str = "logits") -> str:
    """`results/logits/<model>.parquet`, or its `.hidden.parquet` companion."""
    suffix = "" if kind == "logits" else f".{kind}"
    return f"{RESULTS}/logits/{model}{suffix}.parquet"


def metrics_path(model: str, gt: str, kind: str = "positions") -> str:
    """Per-position metrics of a model against a ground truth, or their `.summary.csv`."""
    base = f"{RESULTS}/metrics/{model}__{gt}"
    return base + (".parquet" if kind == "positions" else ".summary.csv")


def token_states_path(split: str) -> str:
    """Cached head inputs of the token track's source: `train` (fitting the learned heads) or `eval` (the prompts)."""
    return result_path("tokens", f"{split}.states.parquet")


def token_head_path(model: str) -> str:
    return model_path(model, "head.pt")


def tbat_path(model: str, kind: str = "positions") -> str:
    return f"{RESULTS}/tbat/{model}" + (".parquet" if kind == "positions" else ".summary.csv")


def segment_path(model: str, iteration: int) -> str:
    """The state a segment of `model`'s training hands on at `iteration`."""
    return model_path(model, f"segments/{iteration}.pt")


def token_prompts_path() -> str:
    """The token track's sampling prompts (whole tokens of its source's tokenizer)."""
    return result_path("tokens", "prompts.parquet")


def smollm2_path() -> str:
    """The packaged SmolLM2, converted once to a `transformers` folder (rule convert_smollm2)."""
    return data_path("smollm2/config.json")


def log_path(stage: str, name: str) -> str:
    return f"{RESULTS}/logs/{stage}/{name}.log"


def benchmark_path(stage: str, name: str) -> str:
    return f"{RESULTS}/benchmarks/{stage}/{name}.tsv"
