"""Jobs that share a cluster submission: Snakemake's job groups, which the SLURM profile (profiles/slurm) turns on by
naming them in its `group-components`. A group is one queue wait and one Snakemake start-up on a node for several
jobs of seconds; the Snakefile gives each job of `GROUPED_RULES` its group (`set_cluster_groups`, by `job_group`),
and each job a share of its group's layer (`group_cpus`). Scheduling only: no job's params or result depend on a
group, and no job script imports this module, so editing it reruns nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oversmooth.core.catalog import checkpoint_parts, is_token_model, svd_models, svd_source, trained_models

# A group runs its jobs in layers (Snakemake's group resources): `group_cpus` (profiles/slurm `resources`, per
# submission) is a layer's width. A CPU job of seconds takes its threads of it, so that several share a layer; any
# other job asks for more than any profile grants, is cut down to the whole layer and has it alone: a group of GPU
# jobs asks for one GPU, and a group asks for the sum of its long jobs' runtimes.
GROUP_CPUS = "group_cpus"
WHOLE_LAYER = 1 << 20


def group_cpus(side_by_side: bool) -> int | Callable:
    """A job's `GROUP_CPUS` resource: its threads where it shares a layer (`side_by_side`), else a whole layer."""
    return (lambda wildcards, threads: threads) if side_by_side else WHOLE_LAYER


# Job groups: jobs that share one cluster submission (Snakemake's `group`, combined up to the profile's
# `group-components`): one queue wait and one Snakemake start-up on the node for several jobs. A group becomes ready
# when every member's inputs are, so a group holds jobs of one stage of the run (STAGES, in the order they become
# ready), and no GPU job's group waits on a CPU job that the GPU job does not wait for itself. Left out: the
# trainings (hours each); a checkpoint's CPU job and its logits (a group of several checkpoints' would wait for several
# trainings, and a group name cannot follow the checkpoint's model); the converted pretrained model and the token
# prompts (grouped with the prompts, a GPU job that reads one would wait for what only the other needs).
STAGES = ("start", "family", "truth")  # no training needed; after the family's trainings; after a ground truth's
GPU_INFERENCE = ("evaluate_model", "extract_logits", "sample", "sample_with_bat")
SECONDS_ANALYSES = ("anisotropy", "effective_rank", "time_metrics", "unargmaxable", "oversmoothing_metrics")
LONG_ANALYSES = ("tbat", "quality")
RULE_GROUPS = {  # rules whose jobs form one group whatever their models
    "token_states": "gpu-start", "token_head": "gpu-heads", "sample_direct": "gpu-token-samples",
    "select_prompts": "cpu-inputs", "ngram_rank": "cpu-inputs", "svd_model": "cpu-svd", "bat_decode": "cpu-decode",
    "sample_bat": "cpu-bat-sampling",  # apart from the quality jobs that read it (through a local join)
}
GROUPED_RULES = (*GPU_INFERENCE, *SECONDS_ANALYSES, *LONG_ANALYSES, *RULE_GROUPS)


def model_stage(config: Mapping, model: str) -> str:
    """The stage after which a model's outputs can be made: "family" for the family's trained models, their
    checkpoints and the SVD heads of a family model, "truth" for a trained ground truth (and SVD heads of one), and
    "start" for what this run trains nothing for (the token track, a pretrained ground truth, human text)."""
    base = checkpoint_parts(model)[0]
    if base in svd_models(config):
        base = svd_source(config)
    if base not in trained_models(config):
        return "start"
    return "truth" if base.startswith("gt-") else "family"


def job_group(rule: str, wildcards: Mapping[str, str], config: Mapping) -> str | None:
    """The group of a job of `rule` with `wildcards` on a cluster (None: submitted alone).

    GPU groups: a stage's evaluations, logits and samples (a checkpoint's logits alone: they wait on its CPU job),
    the SVD heads' (after the one group of their CPU jobs), the token track's cached states, heads and direct
    samples. CPU groups: the jobs of seconds that run one thread (`cpu-short`, whatever their stage: what waits on
    them is a table), the byte models' BA decodings, the SVD heads, the prompts and n-gram rank, the token track's
    BAT sampling; the longer analyses (TBAT, quality, a token-track head's metrics over its whole vocabulary) by
    stage."""
    if rule in RULE_GROUPS:
        return RULE_GROUPS[rule]
    models = [wildcards[name] for name in ("model", "gt") if name in wildcards]
    stage = max((model_stage(config, m) for m in models), key=STAGES.index, default="start")
    if rule in GPU_INFERENCE:
        if checkpoint_parts(models[0])[1] is not None:
            return None
        return "gpu-svd" if models[0] in svd_models(config) else f"gpu-{stage}"
    token_metrics = rule == "oversmoothing_metrics" and is_token_model(models[0])
    if rule in SECONDS_ANALYSES and not token_metrics:
        return "cpu-short"
    if rule in SECONDS_ANALYSES or rule in LONG_ANALYSES:
        return f"cpu-{stage}"
    return None


def set_cluster_groups(rules: Iterable[Any], group_components: Callable[[], Mapping[str, int]],
                       config: Mapping) -> None:
    """Give each of the workflow's `rules` in GROUPED_RULES its jobs' groups (`job_group`), each group on only where
    the run's group components (Snakemake's `--group-components`, the SLURM profile's; `group_components()` reads
    them when a job is made, after Snakemake has read the command line) name it: a run without them has no groups."""
    for rule in rules:
        if rule.name in GROUPED_RULES:
            rule.group = _group_of_jobs(rule.name, group_components, config)


def _group_of_jobs(rule: str, group_components: Callable[[], Mapping[str, int]], config: Mapping) -> Callable:
    def group(wildcards) -> str | None:
        name = job_group(rule, dict(wildcards.items()), config)
        return name if name in group_components() else None

    return group
