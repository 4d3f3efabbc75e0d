"""The workflow's dispatch through `profiles/slurm` on a real one-node SLURM that the test starts on localhost.

A copy of the local smoke run whose training of one bottleneck and one token-track head are rebuilt (`--forcerun`)
through SLURM with what was computed from them (training, checkpoints, evaluation, logits, metrics, TBAT, samples,
quality, the head); GPU rules ask for the node's fake GPU (gpu:h100, backed by /dev/null) on the GPU partition, CPU
rules go to the CPU partition, tables and figures run on the submit host, and every table equals the local run's.
Jobs of seconds go in the profile's groups (one submission each, a GPU group asking for one GPU); when a group's job
fails, the next command reruns it alone, not the group's jobs that finished. Resume, requeue and a lost controller:
tests/test_slurm_drill.py. The `cluster` fixture (tests/conftest.py) holds the
machine's one local SLURM, so this module and the drill's take turns.

Skipped where SLURM cannot be stood up (not root, or the Debian packages missing), except under
OVERSMOOTH_REQUIRE_SLURM=1, which `.ci/run` sets: there it fails. Each hang guard is at least twice what the step
takes on the project's machine (docs/testing.md has the measured times).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pandas as pd
import pytest
from slurm_cluster import (
    CPU_PARTITION,
    GPU_PARTITION,
    group_of,
    profile_command,
    rule_of,
    rules_of,
    slurm_jobs,
    wildcards_of,
)
from workflow_helpers import planned_jobs, report_rules

from oversmooth.core.layout import logits_path, rank_path
from oversmooth.workflow.plan import parse_dry_run

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

GPU_RULES = {
    "train_model", "train_segment", "evaluate_model", "extract_logits", "sample", "sample_with_bat", "sample_direct",
    "rank_constrained_head", "token_states", "token_head",
}
TIMING_TABLES = {"table_i_1.csv"}  # seconds, which differ from run to run
REBUILT_HEAD = "tok-learned-r4"


@pytest.fixture(scope="module")
def slurm_run(cluster, smoke_run, tmp_path_factory):
    """The local smoke run copied; bn-4's training and one token head, and everything computed from them, rebuilt
    through SLURM (`--forcerun`: a deleted intermediate file alone makes Snakemake rebuild nothing)."""
    _, local_workdir, _ = smoke_run
    workdir = tmp_path_factory.mktemp("slurm_run") / "run"
    shutil.copytree(local_workdir, workdir, symlinks=True)
    rebuilt = ["results/models/bn-4/best.pt", f"results/models/{REBUILT_HEAD}/head.pt"]
    before = {job["JobId"] for job in slurm_jobs(cluster)}
    started = time.monotonic()
    result = subprocess.run(profile_command(workdir, "all", "--forcerun", *rebuilt, timeout_s=1500),
                            capture_output=True, text=True, env=cluster.env, check=False)
    if result.returncode != 0:
        pytest.fail(f"snakemake --profile profiles/slurm all failed ({result.returncode}):\n"
                    f"{result.stderr[-6000:]}\n{cluster.logs()}")
    jobs = [job for job in slurm_jobs(cluster) if job["JobId"] not in before]
    return workdir, local_workdir, jobs, time.monotonic() - started


def test_a_slurm_rebuild_gives_the_tables_of_a_local_run(slurm_run):
    workdir, local_workdir, _, _ = slurm_run
    local_tables = sorted((local_workdir / "results" / "tables").glob("*.csv"))
    assert len(local_tables) >= 20
    for local in local_tables:
        cluster_table = workdir / "results" / "tables" / local.name
        if local.name not in TIMING_TABLES:
            pd.testing.assert_frame_equal(pd.read_csv(cluster_table), pd.read_csv(local), check_exact=False,
                                          rtol=1e-9, obj=local.name)
    rebuilt = workdir / "results" / "tables" / "table_4_1.csv"
    assert rebuilt.stat().st_mtime > (local_workdir / "results" / "tables" / "table_4_1.csv").stat().st_mtime


def test_gpu_rules_ask_for_a_gpu_and_cpu_rules_go_to_the_cpu_partition(slurm_run):
    _, _, jobs, _ = slurm_run
    rules = {rule for job in jobs for rule in rules_of(job)}
    assert {"train_model", "checkpoint_model", "evaluate_model", "extract_logits", "oversmoothing_metrics", "tbat",
            "sample_with_bat", "quality", "token_head"} <= rules
    localrules = {"metrics_table", "position_figure", "quality_table", "table_3_1", "table_7_3", "figure_token_heads",
                  "figure_token_bottleneck", "token_findings", "join_samples", "all"}
    assert not rules & localrules
    for job in jobs:
        assert job["JobState"] == "COMPLETED", job
        gpu = {rule in GPU_RULES for rule in rules_of(job)}
        assert len(gpu) == 1, f"a submission of GPU and CPU rules: {job['Comment']}"
        if gpu == {True}:  # one GPU, also for a group of GPU jobs (they run one after another)
            assert job["Partition"] == GPU_PARTITION and job.get("TresPerJob") == "gres:gpu:h100:1", job
        else:
            assert job["Partition"] == CPU_PARTITION and "gpu" not in job.get("TresPerJob", ""), job
    train = next(job for job in jobs if rule_of(job) == "train_model")
    assert "mem=2000M" in train["TRES"] and train["TimeLimit"] == "00:30:00"
    assert wildcards_of(train) == "bn-4" and sum(rule_of(job) == "train_model" for job in jobs) == 1
    # a checkpoint is made on the CPU partition and its logits go to the GPU partition, each submitted alone
    checkpoint_jobs = {rule_of(job): job["Partition"] for job in jobs
                       if "bn-4@10" in job["Comment"] or job["Comment"].endswith("_wildcards_bn-4_10")}
    assert checkpoint_jobs == {"checkpoint_model": CPU_PARTITION, "extract_logits": GPU_PARTITION}
    assert sum("token_head" in rules_of(job) for job in jobs) == 1


def test_jobs_of_seconds_go_in_groups_that_finish(slurm_run):
    """The rebuild's evaluations, logits and samples, metrics and the like share submissions (the profile's
    groups); every group finished."""
    _, _, jobs, _ = slurm_run
    groups = [job for job in jobs if group_of(job) is not None]
    assert {"gpu-family", "cpu-short"} <= {group_of(job) for job in groups}
    assert all(job["JobState"] == "COMPLETED" for job in groups)
    assert len(jobs) < sum(len(rules_of(job)) for job in jobs)  # fewer submissions than rules run, at the least


def test_a_failed_member_of_a_group_reruns_alone_without_the_group_s_finished_members(slurm_run, cluster,
                                                                                      tmp_path):
    """bn-4's effective rank fails (its hidden states damaged, their time kept) in a group with every model's
    anisotropy, which finish before it (more threads, so Snakemake runs them first); the next command submits the
    effective rank alone and leaves the anisotropy results as they are. The tables they feed are made anew, as in a
    first run (Snakemake remakes no missing file whose readers are up to date)."""
    workdir = tmp_path / "run"
    shutil.copytree(slurm_run[0], workdir, symlinks=True)
    hidden, failing = workdir / logits_path("bn-4", "hidden"), rank_path("bn-4", "effective_rank")
    command = ["all", "--forcerun", "anisotropy", failing, "--set-threads", "anisotropy=2", "--retries", "0"]
    planned = subprocess.run(profile_command(workdir, "-n", *command, timeout_s=300), capture_output=True, text=True,
                             env=cluster.env, check=True)
    for job in parse_dry_run(planned.stdout + planned.stderr):
        if job.rule in report_rules():
            for path in job.outputs:
                (workdir / path).unlink(missing_ok=True)
    kept, times = hidden.read_bytes(), os.stat(hidden)
    hidden.write_bytes(b"damaged")
    os.utime(hidden, ns=(times.st_atime_ns, times.st_mtime_ns))
    before = {job["JobId"] for job in slurm_jobs(cluster)}
    started = time.time()
    first = subprocess.run(profile_command(workdir, *command, timeout_s=1200), capture_output=True, text=True,
                           env=cluster.env, check=False)
    assert first.returncode != 0, first.stderr[-4000:]
    submitted = [job for job in slurm_jobs(cluster) if job["JobId"] not in before]
    assert [(group_of(job), job["JobState"]) for job in submitted] == [("cpu-short", "FAILED")], submitted
    anisotropy = sorted((workdir / "results" / "rank").glob("*.anisotropy.csv"))
    assert len(anisotropy) >= 4 and all(path.stat().st_mtime > started for path in anisotropy)
    assert not (workdir / failing).exists()
    finished = {path: path.stat().st_mtime_ns for path in anisotropy}

    hidden.write_bytes(kept)
    os.utime(hidden, ns=(times.st_atime_ns, times.st_mtime_ns))
    planned = subprocess.run(profile_command(workdir, "-n", "all", timeout_s=300), capture_output=True, text=True,
                             env=cluster.env, check=True)
    jobs = [job for job in planned_jobs(planned.stdout + planned.stderr) if job[0] not in report_rules()]
    assert jobs == [("effective_rank", "model=bn-4")], jobs
    before = {job["JobId"] for job in slurm_jobs(cluster)}
    second = subprocess.run(profile_command(workdir, "all", timeout_s=900), capture_output=True, text=True,
                            env=cluster.env, check=False)
    assert second.returncode == 0, second.stderr[-4000:]
    submitted = [job for job in slurm_jobs(cluster) if job["JobId"] not in before]
    assert [rules_of(job) for job in submitted] == [["effective_rank"]]
    assert (workdir / failing).exists()
    assert {path: path.stat().st_mtime_ns for path in anisotropy} == finished


def test_nothing_left_to_do_after_the_slurm_run(slurm_run, cluster):
    workdir, _, _, _ = slurm_run
    result = subprocess.run(profile_command(workdir, "-n", "all", timeout_s=300), capture_output=True, text=True,
                            env=cluster.env, check=False)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr
