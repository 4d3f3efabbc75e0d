"""Every figure the docs and config comments take from a compute plan is the plan's: docs/cluster.md's plan block is
what `make plan CONFIG=config/thesis.yaml` prints (`make docs` writes it), and each figure quoted in prose (GPU-hours,
FLOPs, disk, a job's hours, the pilot's share, the smoke run's jobs) is computed here from the plans of
config/thesis.yaml, config/pilot.yaml and config/smoke.yaml (Snakemake's dry runs, under a minute) and looked up in its
file as a phrase."""

from __future__ import annotations

import importlib.util
import math
import re

import pytest

from oversmooth.core.catalog import training_settings
from oversmooth.core.cluster import bat_sampling_runtime, token_bat_sampling_seconds
from oversmooth.workflow.plan import DEFAULT_MFU, GPU_PEAK, compute_plan, resume_state_gb, training_flops
from workflow_helpers import REPO


@pytest.fixture(scope="module")
def plans():
    return {name: compute_plan([f"config/{name}.yaml"], base=REPO, workflow=REPO)
            for name in ("thesis", "pilot", "smoke")}


def flops(value: float) -> str:
    """1.09e19 as the docs write it: 1.1e19."""
    return f"{value:.1e}".replace("e+", "e")


def gpu_hours(flop: float, gpu: str, mfu: float) -> float:
    return flop / (GPU_PEAK[gpu] * mfu) / 3600


def plan_figures(plans: dict) -> dict[str, str]:
    """The figures the docs quote, as they quote them, from the thesis's, the pilot's and the smoke run's plans."""
    thesis, pilot = plans["thesis"], plans["pilot"]
    family, pilot_total = thesis.table().set_index("family"), pilot.table().set_index("family")
    total, planner = family.loc["total"], thesis.planner()
    sample_bat = [cost.cpu_h for cost in thesis.costs("sample_bat")]
    figures = {
        "mfu": f"{DEFAULT_MFU * 100:.0f}",
        "smoke_jobs": f"{len(plans['smoke'].jobs)}",
        "thesis_h200": f"{total['gpu_h']:.0f}",
        "thesis_a100": f"{thesis.table('a100', 0.35).set_index('family').loc['total', 'gpu_h']:.0f}",
        "pilot_h200": f"{pilot_total.loc['total', 'gpu_h']:.1f}",
        "pilot_h200_2": f"{pilot_total.loc['total', 'gpu_h']:.2f}",
        "pilot_share": f"{100 * pilot_total.loc['total', 'gpu_h'] / total['gpu_h']:.1f}",
        "disk": f"{total['disk_gb']:.0f}",
        "resume": f"{resume_state_gb(thesis.config, thesis.trained_models()):.1f}",
        "tbat_cpu": f"{family.loc['tbat', 'cpu_h']:.0f}",
        "quality_cpu": f"{family.loc['quality', 'cpu_h']:.0f}",
        "samples_gpu": f"{family.loc['samples', 'gpu_h']:.2f}",
        "sample_bat_cpu": f"{sum(sample_bat):.0f}",
        "sample_bat_jobs": f"{len(sample_bat)}",
        "tok_full_bat_h": f"{planner.job('sample_bat', {'model': 'tok-full', 'method': 'ba_epsilon'}).cpu_h:.1f}",
        "tok_full_tbat_cpu": f"{planner.job('tbat', {'model': 'tok-full'}).cpu_h:.1f}",
    }
    solver_s = token_bat_sampling_seconds(thesis.config["tokens"]["sampling"], None)
    figures["sample_bat_min"] = f"{bat_sampling_runtime(solver_s, 0, 1)}"
    for name, model in (("bn", "bn-4"), ("gt", "gt-nanogpt300m")):
        flop = training_flops(thesis.config, model)
        train = training_settings(thesis.config, model)["train"]
        jobs = math.ceil(train["max_iters"] / train["iters_per_job"])
        a100 = [gpu_hours(flop, "a100", mfu) for mfu in (0.45, 0.30)]
        figures |= {f"{name}_flops": flops(flop), f"{name}_h200": f"{gpu_hours(flop, 'h200', DEFAULT_MFU):.0f}",
                    f"{name}_a100": "{:.0f}-{:.0f}".format(*a100), f"{name}_jobs": f"{jobs}",
                    f"{name}_steps": f"{train['iters_per_job']:,}",
                    f"{name}_job_a100": "{:.0f}-{:.0f}".format(*(hours / jobs for hours in a100)),
                    f"{name}_job_h200": f"{gpu_hours(flop, 'h200', DEFAULT_MFU) / jobs:.1f}"}
    return figures


# Each phrase as its file writes it (whitespace and a comment's `#` at a line's start aside; a range's dash `-`
# stands for `-` or `–`), its figures in braces
QUOTES = [
    ("README.md", "prove the path with the pilot (the thesis's shape at {pilot_h200} H200-hours)"),
    ("docs/cluster.md", "--configfile config/pilot.yaml # {pilot_h200} H200-hours"),
    ("docs/cluster.md", "checkpoints) at {pilot_h200} H200-hours, {pilot_share} % of the thesis config's (`make plan`)"),
    ("docs/cluster.md", "before you commit the thesis config's {thesis_h200} H200-hours."),
    ("docs/cluster.md", "About {thesis_h200} H200-hours, nearly all of it training (21 bn runs, 3 MoS members, the 300M "
                        "ground truth: {bn_flops} and {gt_flops} FLOPs), {disk} GB of weights kept, a {resume} GB resume "
                        "state at most."),
    ("docs/cluster.md", "`--gpu a100 --mfu 0.35` (an assumption) gives {thesis_a100} A100-hours."),
    ("docs/cluster.md", "The CPU-hours are one core's: TBAT's {tbat_cpu} (every method"),
    ("docs/cluster.md", "the token track's 17 heads {sample_bat_cpu} (rule `sample_bat`, {sample_bat_jobs} CPU jobs:"),
    ("docs/cluster.md", "the k = 512 heads' {tok_full_bat_h} h each, asking SLURM for {sample_bat_min} minutes), quality "
                        "{quality_cpu};"),
    ("docs/cluster.md", "(~4e-5 s a byte: {samples_gpu} GPU-hours for every sample job together)"),
    ("docs/cluster.md", "A thesis-scale bn model is ~{bn_flops} FLOPs ({bn_h200} H200-hours at the measured {mfu} % MFU; "
                        "{bn_a100} A100-hours at an assumed 30-45 %), the 300M ground truth ~{gt_flops} ({gt_h200} "
                        "H200-hours; {gt_a100} A100-hours)"),
    ("docs/cluster.md", "runs each bn model in {bn_jobs} jobs of {bn_steps} steps ({bn_job_a100} h on an A100, "
                        "~{bn_job_h200} h on an H200) and the 300M ground truth in {gt_jobs} of {gt_steps} "
                        "({gt_job_a100} h on an A100)"),
    ("docs/stages.md", "(`make plan`: {tok_full_tbat_cpu} CPU-hours for tok-full,"),
    ("config/pilot.yaml", "The pilot: the thesis's shape at {pilot_share} % of its GPU-hours"),
    ("config/pilot.yaml", "(`make plan CONFIG=config/pilot.yaml`: {pilot_h200_2} H200-hours at {mfu} % MFU)"),
    ("config/thesis.yaml", "~{bn_flops} FLOPs per bn model ({bn_h200} H200-h, {bn_a100} A100-h): four jobs of "
                           "{bn_job_a100} h"),
    ("config/thesis.yaml", "~{gt_flops} FLOPs ({gt_h200} H200-h, {gt_a100} A100-h): ten jobs of {gt_job_a100} h"),
    ("config/thesis.yaml", "(sample_bat; tok-full {tok_full_bat_h} h each, `make plan`)"),
    ("config/smoke.yaml", "the whole DAG end to end ({smoke_jobs} jobs)"),
]


def plain(text: str) -> str:
    """Text as a phrase is looked up in it: comment marks at a line's start dropped, whitespace runs one space, an
    en dash a hyphen."""
    return " ".join(re.sub(r"(?m)^\s*#", " ", text).replace("–", "-").split())


def test_a_phrase_is_found_across_lines_and_comment_marks_and_a_stale_figure_is_not():
    text = plain("# The pilot: the thesis's shape at 0.3 % of its\n# GPU-hours; 21–32 A100-hours")
    assert plain("the thesis's shape at {share} % of its GPU-hours; 21-32 A100-hours").format(share="0.3") in text
    assert "shape at 1 % of" not in text


def test_the_plan_block_of_docs_cluster_md_is_what_make_plan_prints(repo, plans):
    spec = importlib.util.spec_from_file_location("update_docs", repo / "docs" / "update_docs.py")
    update_docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(update_docs)
    cluster = (repo / "docs" / "cluster.md").read_text()
    shown = cluster[cluster.index(update_docs.PLAN_BEGIN):cluster.index(update_docs.PLAN_END) + len(update_docs.PLAN_END)]
    report = plans["thesis"].report()
    assert report.startswith("plan for config/thesis.yaml: ")
    assert shown == f"{update_docs.PLAN_BEGIN}\n```text\n{report}\n```\n{update_docs.PLAN_END}", (
        "docs/cluster.md's plan is stale: run `make docs`")


def test_every_figure_the_docs_take_from_a_plan_is_the_plan_s(repo, plans):
    figures = plan_figures(plans)
    texts = {name: plain((repo / name).read_text()) for name in {name for name, _ in QUOTES}}
    missing = [f"{name}: {plain(phrase.format(**figures))!r}" for name, phrase in QUOTES
               if plain(phrase.format(**figures)) not in texts[name]]
    assert missing == [], "these phrases, with the plan's figures, are not in their files:\n" + "\n".join(missing)
