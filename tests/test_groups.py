"""Jobs that share a cluster submission: profiles/slurm's groups (`oversmooth.workflow.groups.job_group`, on where the
profile's `group-components` names them). The thesis config submits at most a third of its cluster jobs, no group
mixes GPU and CPU jobs, no GPU job's submission waits for a CPU job it does not wait for itself, and a run without
the profile has no groups. A grouped submission on a real SLURM and a failed member's rerun: tests/test_slurm.py."""

from __future__ import annotations

import subprocess

import pytest
from workflow_helpers import REPO, SNAKEMAKE

from oversmooth.core.provenance import module_closure
from oversmooth.workflow.groups import job_group
from oversmooth.workflow.config import load_config
from oversmooth.workflow.plan import Costs, Job, dag_jobs, parse_dry_run, submission_report
from oversmooth.workflow.submissions import (
    PROFILE,
    count_submissions,
    gpu_waits_behind_cpu,
    local_rules,
    mixed_groups,
)

THESIS = [REPO / "config" / "thesis.yaml"]


@pytest.fixture(scope="module")
def thesis():
    """The thesis config's jobs in the profile's groups (Snakemake's dry run through profiles/slurm), and its local
    rules."""
    return dag_jobs(THESIS, REPO, REPO / PROFILE), local_rules(THESIS, REPO)


def test_the_thesis_config_submits_at_most_a_third_of_its_cluster_jobs(thesis):
    jobs, local = thesis
    submissions = count_submissions(jobs, local)
    assert submissions.cluster_jobs > 600 and submissions.local > 50  # the tables and figures run locally
    assert 3 * submissions.submitted <= submissions.cluster_jobs, submissions
    assert submissions.snakemake_startups(grouped=True) < submissions.snakemake_startups(grouped=False)


def test_no_group_mixes_gpu_and_cpu_jobs_and_no_gpu_job_waits_behind_a_cpu_one(thesis):
    jobs, _ = thesis
    grouped = [job for job in jobs if job.group is not None]
    assert any(job.gpus for job in grouped) and any(not job.gpus for job in grouped)
    assert mixed_groups(jobs) == []
    assert gpu_waits_behind_cpu(jobs) == []


def test_a_checkpoint_s_logits_and_the_trainings_are_submitted_alone(thesis):
    """A checkpoint's logits wait on its own CPU job (one group per checkpoint would hold one job); a training runs
    for hours."""
    jobs, _ = thesis
    alone = {job.rule for job in jobs if job.group is None}
    assert {"train_segment", "train_model", "checkpoint_model"} <= alone
    assert all(job.group is None for job in jobs if job.rule == "extract_logits" and "@" in job.wildcards["model"])


def test_the_docs_quote_the_plan_s_submissions(thesis):
    """docs/cluster.md's grouping section carries `make plan`'s lines for the thesis config, not typed numbers."""
    jobs, local = thesis
    docs = (REPO / "docs" / "cluster.md").read_text()
    for line in submission_report(count_submissions(jobs, local), Costs().snakemake_startup_s):
        assert line in docs, f"docs/cluster.md lacks make plan's line {line!r}"


def test_a_run_without_the_profile_has_no_groups(thesis, tmp_path):
    """Groups are the profile's: a dry run (and so a run) of the thesis config without it lists every job on its
    own, the same jobs."""
    out = subprocess.run([str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "--directory", str(tmp_path), "-n", "-F",
                          "all", "--cores", "1", "--configfile", *map(str, THESIS)],
                         capture_output=True, text=True, cwd=REPO, check=True)
    jobs = parse_dry_run(out.stdout + out.stderr)
    assert all(job.group is None for job in jobs) and "Group job" not in out.stdout + out.stderr
    assert sorted(jobs, key=repr) == sorted(thesis[0], key=repr)  # rules, wildcards, benchmarks


GROUPED_DRY_RUN = """\
[Tue Dec  1 23:40:42 2026]
rule train_model:
    output: m/best.pt
    resources: tmpdir=/tmp, gpu=1, group_cpus=4
[Tue Dec  1 23:40:42 2026] Group job gpu-family (jobs in lexicogr. order):

    [Tue Dec  1 23:40:42 2026]
    rule extract_logits:
        input: p.parquet, m/best.pt
        output: m.parquet
        wildcards: model=m
        resources: tmpdir=/tmp, gpu=1, group_cpus=4

    [Tue Dec  1 23:40:42 2026]
    rule sample:
        input: m/best.pt, c/best.pt
        output: m.samples
        resources: tmpdir=/tmp, gpu=1, group_cpus=4
[Tue Dec  1 23:40:42 2026]
rule checkpoint_model:
    input: late.txt
    output: c/best.pt
    resources: tmpdir=/tmp, gpu=0, group_cpus=4
"""


def test_a_gpu_job_grouped_with_one_that_waits_on_a_late_cpu_job_is_found():
    """The checker's own case: extract_logits needs nothing late, but shares its group with a sample job that reads
    a CPU job's output, which waits for a file nothing extract_logits needs makes."""
    jobs = parse_dry_run(GROUPED_DRY_RUN + "rule late:\n    output: late.txt\n    resources: gpu=0\n")
    assert [job.group for job in jobs] == [None, 0, 0, None, None]
    assert [job.gpus for job in jobs] == [1, 1, 1, 0, 0]
    assert gpu_waits_behind_cpu(jobs) == ["extract_logits -> ['checkpoint_model']"]
    assert mixed_groups(jobs) == []
    assert mixed_groups([Job("a", gpus=1, group=0), Job("b", gpus=0, group=0)]) == [["a", "b"]]


@pytest.mark.parametrize(("rule", "wildcards", "group"), [
    ("extract_logits", {"model": "bn-4"}, "gpu-family"),
    ("extract_logits", {"model": "bn-4@5000"}, None),  # after its own CPU checkpoint job
    ("sample", {"model": "svd-r4"}, "gpu-svd"),
    ("evaluate_model", {"model": "gt-nanogpt300m"}, "gpu-truth"),
    ("evaluate_model", {"model": "gt-smollm2"}, "gpu-start"),  # pretrained: no training to wait for
    ("oversmoothing_metrics", {"model": "bn-4", "gt": "gt-nanogpt300m"}, "cpu-short"),
    ("oversmoothing_metrics", {"model": "tok-svd-r4", "gt": "tok-full"}, "cpu-start"),  # its vocabulary: minutes
    ("quality", {"model": "bn-4"}, "cpu-family"),
    ("quality", {"model": "gt-nanogpt300m"}, "cpu-truth"),
    ("tbat", {"model": "bn-4@5000"}, "cpu-family"),
    ("checkpoint_model", {"model": "bn-4", "iteration": "5000"}, None),
    ("train_model", {"model": "bn-4"}, None),
])
def test_a_job_s_group_follows_the_stage_its_inputs_come_from(rule, wildcards, group):
    config = load_config(REPO / "config" / "config.yaml", *THESIS)
    assert job_group(rule, wildcards, config) == group


def test_no_job_script_reaches_the_groups_so_editing_them_reruns_nothing():
    """A rule's params carry the library code its script runs (oversmooth.core.provenance): the groups stay out of
    every script's reach, scheduling only."""
    scripts = sorted((REPO / "workflow" / "scripts").glob("*.py"))
    assert scripts and not [s.name for s in scripts if "oversmooth.workflow.groups" in module_closure(s.read_text())]
