# What the rules share: the library code a rule runs, the scheduling order, the registry of tables and figures
# (oversmooth.workflow.outputs) as the rules use it, the inputs that several stages read, and job resources. Paths are
# oversmooth.core.layout's; each stage's own helpers are in rules/helpers/<stage>.smk.

import re

from oversmooth.core.catalog import (
    bottleneck_models,
    byte_bat_methods,
    byte_sampling_methods,
    family_models,
    ground_truth,
    ground_truth_models,
    is_token_model,
    linear_head_models,
    main_bottleneck_models,
    sampled_models,
    segment_ends,
    svd_source,
    token_head_parts,
    token_measured_methods,
    token_methods,
    token_rank,
    token_sampled_models,
    TOKEN_HUMAN,
    TOKEN_REFERENCE,
    trained_models,
    training_settings,
)
from oversmooth.analysis.decoding import HEAD_METHODS, decoding_settings
from oversmooth.generation.mirostat import sampler_decoding_settings
from oversmooth.core.cluster import SCHEDULING_KEYS, bat_sampling_runtime, token_bat_sampling_seconds
from oversmooth.core.cluster import job_resources as cluster_job_resources
from oversmooth.workflow.groups import GROUP_CPUS, group_cpus
from oversmooth.core.layout import (
    bat_samples_path,
    direct_samples_path,
    benchmark_path,
    corpus_path,
    data_path,
    eval_path,
    figure_path,
    log_path,
    logits_path,
    metrics_path,
    model_path,
    smollm2_path,
    quality_path,
    rank_path,
    RESULTS,
    result_path,
    samples_path,
    segment_path,
    table_path,
    tbat_path,
    teacher_documents_path,
    timing_path,
    token_head_path,
    token_prompts_path,
    token_states_path,
    unargmaxable_path,
)
from oversmooth.core.names import pattern
from oversmooth.core.provenance import library_params
from oversmooth.data.corpus import reads_the_hub, SHARD_DIGESTS, source_files
from oversmooth.workflow.outputs import (
    FIGURE,
    TOKEN_SUFFIX,
    e_table_names,
    measured_methods,
    output,
    outputs_of,
    sample_table_title,
    support_models,
    support_truth,
    planned_outputs,
    token_heads_at,
    token_tbat_methods,
    token_tbat_positions,
    truncation_table_names,
)


def library_code(script):
    """The params that tie a rule to its script workflow/scripts/<script>.py (`code_script`) and to the library code
    the script runs, one per module (`code_<module>`), so that editing either reruns the rule and the rerun's reason
    names the script or module (comments, docstrings and layout do not count). Use as `**library_code("<script>")`."""
    return library_params(ROOT / "workflow" / "scripts" / f"{script}.py", root=ROOT)


# Scheduling order (`priority:`): the jobs every metric waits on first. The ground truths are the longest trainings
# and logit extractions, and the metrics of every model against them cannot start before they end; the prompts and
# the SmolLM2 conversion (seconds) unblock every logit extraction and sample and the token track, whose states and
# heads then go with the trainings (else they wait behind the byte track's analysis jobs and end the run last), and
# so does the full head's TBAT, the longest analysis job (minutes, where the others take seconds).
# Order only: no result depends on it.
PRIORITY_PROMPTS, PRIORITY_GROUND_TRUTH, PRIORITY_TRAINING = 100, 90, 50


def ground_truth_first(model, other=0):
    """The priority of a job of `model` where ground truths and other models share one rule (the ground truths'
    jobs go first)."""
    return PRIORITY_GROUND_TRUTH if model in ground_truth_models(config) else other


def settings_without_threads(settings):
    """A config section without the keys that only shape a job (`threads`, `iters_per_job`): how many CPU threads
    a job gets, or how many jobs a training takes, does not change its result."""
    return {k: v for k, v in settings.items() if k not in SCHEDULING_KEYS}


def rows_of(name):
    """The models that form a table's rows or a figure's panels (the registry: oversmooth.workflow.outputs)."""
    return list(output(config, name).rows)


def methods_of(name):
    """The decoding methods a table shows."""
    return list(output(config, name).methods)


def built_by(rule):
    """The values of a rule's wildcard: the names of the planned tables or figures it builds."""
    return "|".join(outputs_of(config, rule))


def reported(path, name):
    """`path` flagged for `snakemake --report` with the caption (workflow/report/<caption>.rst, Jinja on the job)
    and section of the registered output `name`."""
    entry = output(config, name)
    return report(path, caption=f"../workflow/report/{entry.caption}.rst", category=entry.category)


def rule_reported(path, rule):
    """`path` of a rule that builds several outputs through a wildcard, reported with the one caption and report
    section they share."""
    built = outputs_of(config, rule)
    if len({(o.caption, o.category) for o in built.values()}) != 1:
        raise ValueError(f"the outputs {list(built)} of rule {rule} need one caption and one report section")
    return reported(path, next(iter(built)))


def output_files(name):
    """A registered output's files: a table's path, or a figure's PNG (reported) and PDF."""
    entry = output(config, name)
    if entry.kind == FIGURE:
        return {"png": reported(figure_path(name, "png"), name), "pdf": figure_path(name, "pdf")}
    return reported(f"{RESULTS}/{entry.files[0]}", name)


def all_targets():
    """Everything the target `all` builds: the data stage's record and prompts, and every planned output."""
    files = [f"{RESULTS}/{file}" for entry in planned_outputs(config) for file in entry.files]
    return [data_path("manifest.json"), data_path("prompts.parquet"), *files]


def loaded_ground_truth(model):
    """The config entry of a ground truth that is loaded (`hf` or `token`), None for models trained here."""
    if model.startswith("gt-"):
        gt = ground_truth(config, model)
        if gt["kind"] in ("hf", "token"):
            return gt
    return None


def lm_folder_input(path):
    """The file that stands for a local LM folder setting (a `token` ground truth's `path`, `tokens.source`): the
    converted SmolLM2 for `smollm2`, else the folder's config.json (a missing folder is then a missing input, named
    by Snakemake)."""
    return smollm2_path() if path == "smollm2" else f"{path}/config.json"


def checkpoint_input(model):
    """The checkpoint of a model trained here; the model folder of a `token` ground truth; nothing for `hf`."""
    gt = loaded_ground_truth(model)
    if gt is None:
        return {"checkpoint": model_path(model, "best.pt")}
    return {"lm": lm_folder_input(gt["path"])} if gt["kind"] == "token" else {}


def shard_inputs(corpus_file=data_path, shards=None):
    """Byte shards as inputs that follow their content, not their time: each shard `ancient()`, so that a touch, a
    copy or a rebuild of the same bytes reruns nothing, beside the corpus's small digest file (`shards.sha256`),
    whose checksum Snakemake compares with the one it recorded when the job last ran: a changed shard changes it.
    `corpus_file(name)`: a file of the corpus's folder; `shards`: input name -> split (default: train and val)."""
    shards = shards or {"train": "train", "val": "val"}
    files = {name: ancient(corpus_file(f"{split}.bin")) for name, split in shards.items()}
    return {**files, "shard_digests": corpus_file(SHARD_DIGESTS)}


def references_of(model):
    """What a model is measured against: the ground truths, or for a token-track head its source's full head."""
    return [TOKEN_REFERENCE] if is_token_model(model) else ground_truth_models(config)


def metric_pairs(models=None):
    """Every (model, reference) pair the metrics compare: the family (with its MoS members), or `models`."""
    models = family_models(config) if models is None else models
    return [(m, gt) for m in models for gt in references_of(m)]


def token_source_input():
    """The file that stands for the token track's source model folder (`tokens.source`)."""
    return lm_folder_input(config["tokens"]["source"])


def prompts_of(model):
    """The prompts a model is sampled from and scored against: the token track's for its models."""
    return token_prompts_path() if is_token_model(model) else data_path("prompts.parquet")


def job_resources(kind, side_by_side=False):
    """What a job of `kind` (train, head, inference or cpu) asks the scheduler for (cluster.job_resources), and its
    share of its cluster group's layer (oversmooth.workflow.groups): `side_by_side` for a CPU job of seconds."""
    resources = cluster_job_resources(config["resources"], kind)
    return resources | {GROUP_CPUS: group_cpus(side_by_side and not resources["gpu"])}
