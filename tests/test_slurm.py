"""The workflow's dispatch through `profiles/slurm` on a real one-node SLURM that the test starts on localhost.

A copy of the local smoke run whose training of one bottleneck and one token-track head are rebuilt (`--forcerun`)
through SLURM with what was computed from them (training, checkpoints, evaluation, logits, metrics, TBAT, samples,
quality, the head); GPU rules ask for the node's fake GPU (gpu:h100, backed by /dev/null) on the GPU partition, CPU
rules go to the CPU partition, tables and figures run on the submit host, and every table equals the local run's.
Resume, requeue and a lost controller: tests/test_slurm_drill.py. The `cluster` fixture (tests/conftest.py) holds the
machine's one local SLURM, so this module and the drill's take turns.

Skipped where SLURM cannot be stood up (not root, or the Debian packages missing), except under
OVERSMOOTH_REQUIRE_SLURM=1, which `.ci/run` sets: there it fails. Each hang guard is at least twice what the step
takes on the project's machine (docs/testing.md has the measured times).
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pandas as pd
import pytest
from slurm_cluster import CPU_PARTITION, GPU_PARTITION, profile_command, rule_of, slurm_jobs, wildcards_of

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
    rules = {rule_of(job) for job in jobs}
    assert {"train_model", "checkpoint_model", "evaluate_model", "extract_logits", "oversmoothing_metrics", "tbat",
            "sample_with_bat", "quality", "token_head"} <= rules
    localrules = {"metrics_table", "position_figure", "quality_table", "table_3_1", "table_7_3", "figure_token_heads",
                  "figure_token_bottleneck", "token_findings", "join_samples", "all"}
    assert not rules & localrules
    for job in jobs:
        assert job["JobState"] == "COMPLETED", job
        if rule_of(job) in GPU_RULES:
            assert job["Partition"] == GPU_PARTITION and job.get("TresPerJob") == "gres:gpu:h100:1", job
        else:
            assert job["Partition"] == CPU_PARTITION and "gpu" not in job.get("TresPerJob", ""), job
    train = next(job for job in jobs if rule_of(job) == "train_model")
    assert "mem=2000M" in train["TRES"] and train["TimeLimit"] == "00:30:00"
    assert wildcards_of(train) == "bn-4" and sum(rule_of(job) == "train_model" for job in jobs) == 1
    # a checkpoint is made on the CPU partition; its logits go to the GPU partition, its metrics and TBAT to the CPU one
    checkpoint_jobs = {rule_of(job): job["Partition"] for job in jobs
                       if "bn-4@10" in job["Comment"] or job["Comment"].endswith("_wildcards_bn-4_10")}
    assert checkpoint_jobs == {"checkpoint_model": CPU_PARTITION, "extract_logits": GPU_PARTITION,
                               "oversmoothing_metrics": CPU_PARTITION, "tbat": CPU_PARTITION}
    assert [wildcards_of(job) for job in jobs if rule_of(job) == "token_head"] == [REBUILT_HEAD]


def test_nothing_left_to_do_after_the_slurm_run(slurm_run, cluster):
    workdir, _, _, _ = slurm_run
    result = subprocess.run(profile_command(workdir, "-n", "all", timeout_s=300), capture_output=True, text=True,
                            env=cluster.env, check=False)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr
