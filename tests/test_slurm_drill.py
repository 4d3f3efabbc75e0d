"""The cluster drill on a real one-node SLURM that the test starts on localhost: a training of 2.5 to 4 minutes
under a 2-minute job time limit advances through segment jobs; one running segment is requeued with `scontrol
requeue`, the controller is killed (SIGKILL) and started again; the weights equal those of an uninterrupted local run,
bit for bit, and Snakemake reports no failed job. And what a job and the submit host know: a job's deadline, a Hub
corpus prepared on the submit host. It needs no smoke run, so `make test` runs it on the worker beside the smoke run's
(the `cluster` fixture, tests/conftest.py, holds the machine's one local SLURM: tests/test_slurm.py waits its turn).

Skipped where SLURM cannot be stood up, except under OVERSMOOTH_REQUIRE_SLURM=1 (`.ci/run`): there it fails. Each
hang guard is at least twice what the step takes on the project's machine (docs/testing.md has the measured times).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from slurm_cluster import CPU_PARTITION, LocalSlurm, profile_command, rule_of, slurm_jobs, wildcards_of
from workflow_helpers import snakemake_command

from oversmooth.core.catalog import segment_ends

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

# The drill's training: 17,500 steps of the smoke's 1-layer model, 8.7-14 ms each (2.5-4 min), in jobs of 3,500
# steps (30-60 s) under a 2-minute time limit that stops itself 20 s before it: four segment jobs (the second
# requeued, the controller killed in the fourth) and the last job, which writes the model.
DRILL_TRAIN = {"max_iters": 17500, "eval_interval": 500, "keep_weights_every": 0, "patience": 1000}
DRILL_PER_JOB = 3500
DRILL_OVERRIDE = f"""\
model_overrides:
  bn-4:
    train: {DRILL_TRAIN}
checkpoints: {{iterations: []}}
"""
DRILL_CLUSTER = f"""\
model_overrides:
  bn-4:
    train: {{iters_per_job: {DRILL_PER_JOB}}}
resources:
  runtime_min: {{train: 2}}
  stop_margin_s: 20
"""
DRILL_TARGET = "results/models/bn-4/last.pt"


def _wait_for(what: str, ready, process: subprocess.Popen | None, timeout_s: float):
    """Poll `ready()` until it returns something truthy; fail when `process` ends first or after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = ready()
        if found:
            return found
        if process is not None and process.poll() is not None:
            pytest.fail(f"snakemake ended while waiting for {what}:\n" + process.stdout.read()[-6000:])
        time.sleep(0.5)
    if process is not None:
        process.kill()
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _running_segment(cluster: LocalSlurm, iteration: int, log: Path, past: str):
    """The job id of the running segment job that ends at `iteration`, once its log contains `past`."""
    for job in slurm_jobs(cluster):
        if (rule_of(job) == "train_segment" and wildcards_of(job) == f"bn-4_{iteration}"
                and job["JobState"] == "RUNNING" and log.exists() and past in log.read_text()):
            return job["JobId"]
    return None


def _active_jobs(cluster: LocalSlurm) -> list[str]:
    return [job["JobId"] for job in slurm_jobs(cluster) if job["JobState"] in ("RUNNING", "PENDING", "CONFIGURING",
                                                                                "COMPLETING", "REQUEUED")]


@pytest.fixture(scope="module")
def drill(cluster, tmp_path_factory):
    """Run the drill; return (workdir, baseline workdir, drill jobs, outputs of both controllers, seconds)."""
    root = tmp_path_factory.mktemp("drill")
    workdir, baseline = root / "cluster", root / "local"
    for folder in (workdir, baseline):
        folder.mkdir()
        (folder / "drill.yaml").write_text(DRILL_OVERRIDE)
    (workdir / "drill_cluster.yaml").write_text(DRILL_CLUSTER)
    # the uninterrupted local run, on the other core while the drill runs
    local = subprocess.Popen(snakemake_command(baseline, "--cores", "1", DRILL_TARGET,
                                               overrides=[baseline / "drill.yaml"]),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    before = {job["JobId"] for job in slurm_jobs(cluster)}
    overrides = [workdir / "drill.yaml", workdir / "drill_cluster.yaml"]
    command = profile_command(workdir, DRILL_TARGET, overrides=overrides, timeout_s=1800)
    started = time.monotonic()
    ends = segment_ends({**DRILL_TRAIN, "iters_per_job": DRILL_PER_JOB})
    logs = workdir / "results" / "logs" / "train"

    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cluster.env,
                             start_new_session=True)  # its own process group: SIGKILL reaches snakemake itself
    # 1. requeue the second segment job once it has trained past its first evaluation
    second_log = logs / f"bn-4.to-{ends[1]}.log"
    requeued = _wait_for("the second segment job", lambda: _running_segment(
        cluster, ends[1], second_log, f"bn-4 it {ends[0] + 500}/"), first, 600)
    subprocess.run(["scontrol", "requeue", requeued], env=cluster.env, check=True)
    # SLURM holds a requeued job for two minutes (its BeginTime); let it start as soon as the node is free
    _wait_for("the requeued job to be pending", lambda: any(
        job["JobId"] == requeued and job["JobState"] == "PENDING" for job in slurm_jobs(cluster)), first, 120)
    subprocess.run(["scontrol", "update", f"JobId={requeued}", "StartTime=now"], env=cluster.env, check=True)
    # 2. kill the controller while the fourth segment job runs, as a lost login node would; its jobs are cancelled
    fourth_log = logs / f"bn-4.to-{ends[3]}.log"
    _wait_for("the fourth segment job", lambda: _running_segment(
        cluster, ends[3], fourth_log, f"bn-4 it {ends[2] + 500}/"), first, 900)
    os.killpg(first.pid, signal.SIGKILL)
    first_output, _ = first.communicate(timeout=60)
    for job_id in _active_jobs(cluster):
        subprocess.run(["scancel", job_id], env=cluster.env, check=False)
    _wait_for("the cancelled jobs to end", lambda: not _active_jobs(cluster), None, 180)
    # 3. start the controller again, as the user would: unlock, then the same command
    subprocess.run(snakemake_command(workdir, "--unlock", DRILL_TARGET, overrides=[workdir / "cluster.yaml",
                                                                          *overrides]), check=True,
                   capture_output=True, env=cluster.env)
    second = subprocess.run(command, capture_output=True, text=True, env=cluster.env, check=False)
    seconds = time.monotonic() - started
    if second.returncode != 0:
        pytest.fail(f"the restarted controller failed ({second.returncode}):\n{second.stderr[-6000:]}\n{cluster.logs()}")
    local_output, _ = local.communicate(timeout=900)
    assert local.returncode == 0, local_output[-6000:]
    jobs = [job for job in slurm_jobs(cluster) if job["JobId"] not in before]
    _write_drill_record(root / "drill_jobs.tsv", jobs)
    return workdir, baseline, jobs, (first_output, second.stdout + second.stderr), seconds, requeued


def _write_drill_record(path: Path, jobs: list[dict[str, str]]) -> None:
    """The drill's job list with times (docs/testing.md quotes it)."""
    rows = [{"job": job["JobId"], "rule": rule_of(job), "wildcards": wildcards_of(job), "state": job["JobState"],
             "restarts": job.get("Restarts"), "limit": job["TimeLimit"], "run_time": job["RunTime"],
             "exit": job.get("ExitCode")} for job in jobs]
    pd.DataFrame(rows).to_csv(path, sep="\t", index=False)
    print(f"\ncluster drill jobs ({path}):\n" + pd.DataFrame(rows).to_string(index=False))


def test_the_drill_s_weights_equal_an_uninterrupted_local_run_bit_for_bit(drill):
    workdir, baseline, _, _, _, _ = drill
    for name in ("last.pt", "best.pt"):
        a = torch.load(baseline / "results" / "models" / "bn-4" / name, weights_only=True)
        b = torch.load(workdir / "results" / "models" / "bn-4" / name, weights_only=True)
        assert a["iteration"] == b["iteration"] and a["model"].keys() == b["model"].keys()
        assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"]), name
    log_a = pd.read_csv(baseline / "results" / "models" / "bn-4" / "train_log.csv").drop(columns="seconds")
    log_b = pd.read_csv(workdir / "results" / "models" / "bn-4" / "train_log.csv").drop(columns="seconds")
    pd.testing.assert_frame_equal(log_a, log_b)
    assert log_b["iteration"].iloc[-1] == DRILL_TRAIN["max_iters"]
    assert not list((workdir / "results" / "models" / "bn-4" / "segments").glob("*.pt"))  # temp: handed on, gone


def test_the_drill_trains_through_jobs_shorter_than_its_training(drill):
    _, _, jobs, _, _, _ = drill
    training = [job for job in jobs if rule_of(job) in ("train_segment", "train_model")]
    ends = segment_ends({**DRILL_TRAIN, "iters_per_job": DRILL_PER_JOB})
    assert {wildcards_of(job) for job in training if rule_of(job) == "train_segment"} == {f"bn-4_{e}" for e in ends}
    assert all(job["TimeLimit"] == "00:02:00" for job in training)
    assert sum(rule_of(job) == "train_model" for job in training) == 1
    completed = [job for job in training if job["JobState"] == "COMPLETED"]
    assert len(completed) == len(ends) + 1  # every segment and the last job, each once


def test_the_requeued_job_resumed_under_its_own_id(drill, cluster):
    workdir, _, jobs, _, _, requeued = drill
    job = next(job for job in jobs if job["JobId"] == requeued)
    assert job["JobState"] == "COMPLETED" and int(job["Restarts"]) >= 1
    ends = segment_ends({**DRILL_TRAIN, "iters_per_job": DRILL_PER_JOB})
    log = (workdir / "results" / "logs" / "train" / f"bn-4.to-{ends[1]}.log").read_text()  # the requeued run's
    resumed = int(re.search(r"resumed bn-4 at iteration (\d+)", log).group(1))
    # from the state saved at SIGTERM (between two evaluations, which save too), not from the segment's start
    assert ends[0] + 500 < resumed < ends[1] and resumed % DRILL_TRAIN["eval_interval"]


def test_the_restarted_controller_goes_on_and_reports_no_failed_job(drill):
    workdir, _, jobs, (first, second), _, _ = drill
    ends = segment_ends({**DRILL_TRAIN, "iters_per_job": DRILL_PER_JOB})
    assert "Error in rule" not in first + second and "Exiting because a job execution failed" not in second
    log = (workdir / "results" / "logs" / "train" / f"bn-4.to-{ends[3]}.log").read_text()
    resumed = int(re.findall(r"resumed bn-4 at iteration (\d+)", log)[-1])
    assert ends[2] + 500 < resumed < ends[3] and resumed % DRILL_TRAIN["eval_interval"]  # saved at scancel's SIGTERM
    cancelled = [job for job in jobs if job["JobState"] == "CANCELLED"]
    assert [wildcards_of(job) for job in cancelled] == [f"bn-4_{ends[3]}"]
    assert "Nothing to be done" not in second and "steps (100%) done" in second


def test_a_job_under_slurm_knows_its_deadline_before_the_time_limit(cluster, tmp_path):
    """`cluster.job_deadline` inside a real job with a 3-minute limit: about 3 minutes less the margin from now."""
    out = tmp_path / "deadline.txt"
    script = ("import time; from oversmooth.core.cluster import job_deadline; "
              f"open('{out}', 'w').write(str(job_deadline(30) - time.time()))")
    subprocess.run(["sbatch", "--wait", "-p", CPU_PARTITION, "-t", "3", "-o", str(tmp_path / "job.log"),
                    f"--wrap={sys.executable} -c \"{script}\""], env=cluster.env, check=True, timeout=300)
    assert 180 - 30 - 20 <= float(out.read_text()) <= 180 - 30


def test_a_hub_corpus_is_prepared_on_the_submit_host_and_fails_offline_naming_the_fix(cluster, tmp_path):
    """Compute nodes rarely reach the Hub: a Hub source makes prepare_corpus a local rule, and offline it fails
    with an error that says where it runs and how to point the source at local files; no job is submitted."""
    hub = tmp_path / "hub.yaml"
    hub.write_text("data:\n  sources:\n    - {kind: hf, path: HuggingFaceFW/fineweb, config: sample-10BT, "
                   "max_bytes: 100000}\n")
    before = {job["JobId"] for job in slurm_jobs(cluster)}
    env = {**cluster.env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf-home")}
    result = subprocess.run(profile_command(tmp_path, "results/data/manifest.json", "--retries", "0",
                                            overrides=[hub], timeout_s=300),
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode != 0
    log = (tmp_path / "results" / "logs" / "data" / "prepare_corpus.log").read_text()
    assert "read by rule prepare_corpus on the machine that runs snakemake" in log
    assert "`path` in config `data.sources`" in log
    assert not [job for job in slurm_jobs(cluster) if job["JobId"] not in before]
