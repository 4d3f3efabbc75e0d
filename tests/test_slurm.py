"""The smoke DAG through `profiles/slurm` on a real one-node SLURM that the test starts on localhost.

GPU rules ask for the node's fake GPU (gpu:h100, backed by /dev/null) on the GPU partition; CPU rules go to the
CPU partition; tables and figures run on the submit host. Skipped where SLURM cannot be stood up (not root, or
the Debian packages missing), except under OVERSMOOTH_REQUIRE_SLURM=1, which `.ci/run` sets: there it fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from slurm_cluster import CPU_PARTITION, GPU_PARTITION, LocalSlurm, missing_requirements
from workflow_helpers import REPO, snakemake_command

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

GPU_RULES = {
    "train_model", "evaluate_model", "extract_logits", "sample", "rank_constrained_head", "token_states", "token_head",
}
CLUSTER_OVERRIDE = f"""\
resources:
  train_gpus: 1
  inference_gpus: 1
  gpu_model: h100
  gpu_partition: {GPU_PARTITION}
  cpu_partition: {CPU_PARTITION}
  mem_mb: {{train: 2000, inference: 2000, cpu: 1500}}
  runtime_min: {{train: 30, inference: 30, cpu: 30}}
"""
# No accounting database here: query squeue, submit without an account, look soon after submitting.
NO_ACCOUNTING = ["--slurm-no-account", "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2"]
TIMING_TABLES = {"table_i_1.csv"}  # seconds, which differ from run to run


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = missing_requirements()
    if reason:
        if os.environ.get("OVERSMOOTH_REQUIRE_SLURM") == "1":
            pytest.fail(f"OVERSMOOTH_REQUIRE_SLURM=1 but a local SLURM cannot be started: {reason}")
        pytest.skip(f"no local SLURM: {reason}")
    slurm = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield slurm
    slurm.stop()


def profile_command(workdir: Path, *targets: str, overrides=(), timeout_s: int = 1500) -> list[str]:
    """`snakemake --profile profiles/slurm` on the smoke config; SIGINT after `timeout_s` so a hang fails the test."""
    override = workdir / "cluster.yaml"
    override.write_text(CLUSTER_OVERRIDE)
    command = snakemake_command(workdir, "--profile", str(REPO / "profiles" / "slurm"), *NO_ACCOUNTING, *targets,
                                overrides=[override, *overrides])
    return ["timeout", "-s", "INT", str(timeout_s), *command]


def slurm_jobs(cluster: LocalSlurm) -> list[dict[str, str]]:
    """Every job slurmctld still knows (MinJobAge keeps finished ones), as `scontrol -o show job` fields."""
    out = subprocess.run(["scontrol", "-o", "show", "job"], capture_output=True, text=True, env=cluster.env,
                         check=True).stdout
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]


def rule_of(job: dict[str, str]) -> str:
    """The rule name from the plugin's job comment (`rule_<name>` or `rule_<name>_wildcards_<values>`)."""
    return job["Comment"].removeprefix("rule_").split("_wildcards_")[0]


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("slurm_run")
    started = time.monotonic()
    result = subprocess.run(profile_command(workdir, "all"), capture_output=True, text=True, env=cluster.env,
                            check=False)
    if result.returncode != 0:
        pytest.fail(f"snakemake --profile profiles/slurm all failed ({result.returncode}):\n"
                    f"{result.stderr[-6000:]}\n{cluster.logs()}")
    return workdir, result, time.monotonic() - started


def test_smoke_dag_through_slurm_gives_the_tables_of_a_local_run(slurm_run, smoke_run):
    workdir, _, _ = slurm_run
    _, local_workdir, _ = smoke_run
    local_tables = sorted((local_workdir / "results" / "tables").glob("*.csv"))
    assert len(local_tables) >= 20
    for local in local_tables:
        cluster_table = workdir / "results" / "tables" / local.name
        assert cluster_table.exists(), f"{local.name} missing from the SLURM run"
        if local.name not in TIMING_TABLES:
            pd.testing.assert_frame_equal(pd.read_csv(cluster_table), pd.read_csv(local), check_exact=False,
                                          rtol=1e-9, obj=local.name)
    for figure in (local_workdir / "results" / "figures").iterdir():
        assert (workdir / "results" / "figures" / figure.name).stat().st_size > 1000


def test_gpu_rules_ask_for_a_gpu_and_cpu_rules_go_to_the_cpu_partition(slurm_run, cluster):
    jobs = slurm_jobs(cluster)
    rules = {rule_of(job) for job in jobs}
    assert {"train_model", "extract_logits", "sample", "oversmoothing_metrics", "tbat", "quality", "token_states",
            "token_head"} <= rules
    localrules = {"metrics_table", "position_figure", "quality_table", "table_3_1", "table_7_3", "figure_token_heads",
                  "all"}
    assert not rules & localrules
    for job in jobs:
        assert job["JobState"] == "COMPLETED", job
        if rule_of(job) in GPU_RULES:
            assert job["Partition"] == GPU_PARTITION and job.get("TresPerJob") == "gres:gpu:h100:1", job
        else:
            assert job["Partition"] == CPU_PARTITION and "gpu" not in job.get("TresPerJob", ""), job
    train = next(job for job in jobs if rule_of(job) == "train_model")
    assert "mem=2000M" in train["TRES"]
    trained = sorted(job["Comment"].split("_wildcards_")[1] for job in jobs if rule_of(job) == "train_model")
    assert trained == ["bn-4", "bn-4-s8", "bn-64", "bn-64-s8", "gt-nanogpt", "mos-4"]  # one job per (k, seed)
    # a checkpoint's logits go to the GPU partition, its metrics and TBAT to the CPU one
    checkpoint_jobs = {rule_of(job): job["Partition"] for job in jobs
                       if "bn-4@10" in job["Comment"] or job["Comment"].endswith("_wildcards_bn-4_10")}
    assert checkpoint_jobs == {"checkpoint_model": CPU_PARTITION, "extract_logits": GPU_PARTITION,
                               "oversmoothing_metrics": CPU_PARTITION, "tbat": CPU_PARTITION}


def test_nothing_left_to_do_after_the_slurm_run(slurm_run, cluster):
    workdir, _, _ = slurm_run
    result = subprocess.run(profile_command(workdir, "-n", "all", timeout_s=300), capture_output=True, text=True,
                            env=cluster.env, check=False)
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr


def test_a_training_job_stopped_by_slurm_resumes_from_its_state_on_retry(cluster, tmp_path):
    override = tmp_path / "long_training.yaml"
    override.write_text("model_overrides:\n  bn-4:\n    train: {max_iters: 3000, eval_interval: 100}\n"
                        "checkpoints: {iterations: []}\n")  # the smoke's checkpoint at iteration 10 is not kept here
    command = profile_command(tmp_path, "results/models/bn-4/best.pt", "--retries", "1", overrides=[override],
                              timeout_s=900)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=cluster.env)
    train_log = tmp_path / "results" / "logs" / "train" / "bn-4.log"
    job_id = _wait_for_training(cluster, train_log, process, past_iteration=300)
    subprocess.run(["scancel", job_id], env=cluster.env, check=True)  # SIGTERM, then SIGKILL after KillWait
    output, _ = process.communicate(timeout=900)
    assert process.returncode == 0, output[-6000:]
    first_attempt = (tmp_path / ".snakemake" / "slurm_logs" / "rule_train_model" / "bn-4" / f"{job_id}.log")
    assert "stopping at iteration" in first_attempt.read_text()
    resumed = re.search(r"resumed bn-4 at iteration (\d+)", train_log.read_text())
    assert resumed and 300 <= int(resumed.group(1)) < 3000
    retry = [job for job in slurm_jobs(cluster) if rule_of(job) == "train_model" and int(job["JobId"]) > int(job_id)]
    assert len(retry) == 1 and "mem=4000M" in retry[0]["TRES"]  # attempt 2 asks for twice mem_mb.train
    history = pd.read_csv(tmp_path / "results" / "models" / "bn-4" / "train_log.csv")
    assert history["iteration"].is_monotonic_increasing and history["iteration"].is_unique
    assert history["iteration"].iloc[-1] == 3000


def _wait_for_training(cluster: LocalSlurm, train_log: Path, process: subprocess.Popen, past_iteration: int) -> str:
    """The SLURM job id of the running training job, once its log shows an evaluation past `past_iteration`."""
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail("snakemake ended before the training job could be stopped:\n" + process.stdout.read()[-6000:])
        text = train_log.read_text() if train_log.exists() else ""
        iterations = [int(i) for i in re.findall(r"bn-4 it (\d+)/", text)]
        running = [job for job in slurm_jobs(cluster)
                   if rule_of(job) == "train_model" and job["JobState"] == "RUNNING"]
        if iterations and max(iterations) >= past_iteration and running:
            return running[0]["JobId"]
        time.sleep(0.5)
    process.kill()
    pytest.fail(f"the training job never got past iteration {past_iteration}")
