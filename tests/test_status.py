"""The run's status from its files alone: a synthetic run in progress (its Snakemake log cut mid-way, a training's
partial log, a lock held), a log of the real smoke run cut mid-way, and the finished smoke run, whose status
docs/cluster.md shows."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import repo_config, snakemake_command, status_rows

from oversmooth.models.train import TrainConfig, append_log_row, start_partial_log
from oversmooth.workflow.runprofile import parse_snakemake_log
from oversmooth.workflow.status import (
    CLOSING_LINE,
    planned_jobs,
    run_log,
    stage_counts,
    status,
    text_table,
)

HEADER = """\
Assuming unrestricted shared filesystem usage.
Building DAG of jobs...
Job stats:
job               count
--------------  -------
prepare_corpus        1
train_segment         1
train_model           2
extract_logits        2
metrics_table         1
all                   1
total                 8

Select jobs to execute...
"""

RUNNING_LOG = HEADER + """\
[Tue Nov 24 02:27:00 2026]
rule prepare_corpus:
    output: results/data/train.bin
    log: results/logs/data/prepare_corpus.log
    jobid: 1
    benchmark: results/benchmarks/data/prepare_corpus.tsv
    reason: Missing output files: results/data/train.bin
    resources: tmpdir=/tmp, gpu=0, slurm_partition=cpu, runtime=60, mem_mb=4000, mem=4 GB, mem_mib=3815
[Tue Nov 24 02:27:10 2026]
Finished jobid: 1 (Rule: prepare_corpus)
1 of 8 steps (12%) done
[Tue Nov 24 02:27:10 2026]
rule train_segment:
    input: results/data/train.bin
    output: results/models/bn-4/segments/12.pt
    log: results/logs/train/bn-4.to-12.log
    jobid: 2
    benchmark: results/benchmarks/train/bn-4.to-12.tsv
    wildcards: model=bn-4, iteration=12
    resources: tmpdir=/tmp, gpu=1, slurm_partition=gpu, runtime=1440, mem_mb=64000
[Tue Nov 24 02:27:11 2026]
rule train_model:
    input: results/data/train.bin
    output: results/models/bn-8/best.pt
    log: results/logs/train/bn-8.log
    jobid: 3
    wildcards: model=bn-8
    resources: tmpdir=/tmp, gpu=1, slurm_partition=gpu, runtime=1440, mem_mb=64000
[Tue Nov 24 02:27:20 2026]
Error in rule train_model:
    message: SLURM-job '7' failed, SLURM status is: 'OUT_OF_MEMORY'
    jobid: 3
    input: results/data/train.bin
    output: results/models/bn-8/best.pt
"""


def _write_run(workdir: Path, log_text: str) -> Path:
    """A run folder with Snakemake's log and a lock held, as a running workflow leaves them."""
    logs = workdir / ".snakemake" / "log"
    logs.mkdir(parents=True)
    log = logs / "2026-11-24T022657.123456.snakemake.log"
    log.write_text(log_text)
    (logs / "2026-11-24T033000.1.snakemake.log").write_text("Building DAG of jobs...\n")  # a dry run beside it
    locks = workdir / ".snakemake" / "locks"
    locks.mkdir()
    (locks / "0.input.lock").write_text("results/data/train.bin\n")
    (locks / "0.output.lock").write_text("results/models/bn-4/segments/12.pt\n")
    return log


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture
def running_run(tmp_path) -> Path:
    """A run in progress: data done, bn-4's first segment running (its partial log with two rows and half a
    third), bn-8's training failed, bn-16 trained by an earlier invocation, the rest planned."""
    _write_run(tmp_path, RUNNING_LOG)
    bench = tmp_path / "results" / "benchmarks" / "data" / "prepare_corpus.tsv"
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                     "9.5\t0:00:09\t1000.0\t2000\t900\t950\t1\t2\t90\t8.5\n")
    bn4 = tmp_path / "results" / "models" / "bn-4"
    start_partial_log(bn4, [], TrainConfig(max_iters=1000, eval_interval=100), until=12)
    for iteration, seconds, val_loss in ((0, 3.0, 5.5), (100, 53.0, 2.25)):
        append_log_row(bn4, {"iteration": iteration, "tokens_seen": iteration * 512, "train_loss": val_loss,
                             "val_loss": val_loss, "lr": 1e-3, "seconds": seconds, "head_singular_entropy_gap": 0.1})
    with open(bn4 / "train_log.partial.csv", "ab") as log:
        log.write(b"200,102400,1.5,1.")  # a row being written
    bn16 = tmp_path / "results" / "models" / "bn-16"
    bn16.mkdir()
    (bn16 / "train_log.csv").write_text("iteration,tokens_seen,train_loss,val_loss,lr,seconds,"
                                        "head_singular_entropy_gap\r\n0,0,5.5,5.5,0.001,1.0,0.1\r\n"
                                        "20,1024,3.0,3.125,0.0003,11.0,0.2\r\n")
    (bn16 / "config.json").write_text('{"train": {"max_iters": 20}, "iterations": 20}')
    return tmp_path


def test_the_status_of_a_running_run(running_run, repo):
    before = _snapshot(running_run)
    text = status(running_run, repo / "rules", now=time.time() + 75)
    assert _snapshot(running_run) == before  # nothing written, the locks left as they were
    lines = text.splitlines()
    assert lines[0].startswith("Snakemake log .snakemake/log/2026-11-24T022657.123456.snakemake.log: running (its "
                               "log last written 0:01:1")  # 75 s, or 76 as the clock turns
    assert lines[0].endswith("1 of 7 jobs done")
    trainings = status_rows(lines, "trainings:")
    assert trainings["model"] == ["state", "iteration", "val_loss", "s/step", "time", "left"]
    # bn-4: 100 of 1000 at 0.5 s a step (50 s over its last 100 steps): 900 x 0.5 = 7 min 30 s left; the row being
    # written is not read
    assert trainings["bn-4"] == ["running", "100/1000", "2.2500", "0.500", "0:07:30"]
    assert trainings["bn-16"] == ["done", "20/20", "3.1250", "0.500", "-"]
    stages = status_rows(lines, "jobs per stage")
    assert stages["stage"] == ["planned", "done", "running", "failed", "interrupted", "left"]
    assert stages["data"] == ["1", "1", "0", "0", "0", "0"]
    assert stages["train"] == ["3", "0", "1", "1", "0", "1"]
    assert stages["logits"] == ["2", "0", "0", "0", "0", "2"]
    assert stages["total"] == ["7", "1", "1", "1", "0", "4"]
    usage = status_rows(lines, "asked for and used per rule")
    assert usage["rule"] == ["jobs", "runtime_min", "max_wall", "runtime_use", "mem_mb", "max_rss_mb", "mem_use"]
    assert usage["prepare_corpus"] == ["1", "60", "0:00:10", "0.3%", "4000", "1000", "25.0%"]


def test_the_command_reads_a_run_beside_its_lock_without_snakemake(running_run):
    before = _snapshot(running_run)
    env = {**os.environ, "PATH": ""}  # no snakemake on the path to call
    result = subprocess.run([sys.executable, "-m", "oversmooth.workflow.status", "--workdir", str(running_run)],
                            capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "bn-4" in result.stdout and "running" in result.stdout.splitlines()[0]
    assert _snapshot(running_run) == before


def test_a_run_that_ended_counts_its_unfinished_jobs_as_interrupted(tmp_path, repo):
    _write_run(tmp_path, RUNNING_LOG + f"{CLOSING_LINE}.snakemake/log/x.snakemake.log\n")
    marker = tmp_path / ".snakemake" / "incomplete" / "cmVzdWx0cy9tb2RlbHMvYm4tNC9zZWdtZW50cy8xMi5wdA=="
    marker.parent.mkdir()
    marker.write_text('{"external_jobid": null}')
    lines = status(tmp_path, repo / "rules").splitlines()
    assert lines[0].endswith(": ended; 1 of 7 jobs done")
    assert lines[1].startswith("1 outputs marked incomplete in .snakemake/incomplete")
    assert status_rows(lines, "jobs per stage")["train"] == ["3", "0", "0", "1", "1", "1"]


def test_the_plan_is_the_job_stats_table_less_all_and_the_total():
    assert planned_jobs(HEADER.splitlines()) == {"prepare_corpus": 1, "train_segment": 1, "train_model": 2,
                                                 "extract_logits": 2, "metrics_table": 1}


def test_a_restarted_job_is_running_again_not_failed(repo):
    restart = RUNNING_LOG + """Trying to restart job 3.
[Tue Nov 24 02:27:30 2026]
rule train_model:
    output: results/models/bn-8/best.pt
    jobid: 3
    wildcards: model=bn-8
    resources: tmpdir=/tmp, mem_mb=128000, runtime=1440
"""
    jobs = parse_snakemake_log(restart.splitlines())
    assert not jobs[3].failed and jobs[3].resources["mem_mb"] == "128000"
    counts = stage_counts(planned_jobs(restart.splitlines()), jobs, False, {"train_model": "train",
                                                                           "train_segment": "train"})
    assert counts.set_index("stage").loc["train", ["running", "failed", "left"]].tolist() == [2, 0, 1]


def test_the_run_log_is_the_latest_that_planned_jobs(tmp_path):
    log = _write_run(tmp_path, RUNNING_LOG)
    assert run_log(tmp_path) == log
    shutil.rmtree(tmp_path / ".snakemake" / "log")
    (tmp_path / ".snakemake" / "log").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no Snakemake log that planned jobs under .*log: has the run "):
        run_log(tmp_path)


def test_a_text_table_aligns_names_left_and_numbers_right():
    frame = pd.DataFrame({"rule": ["a", "long_rule"], "state": ["done", "running"], "jobs": [1, 12]})
    assert text_table(frame, left=2).splitlines() == ["rule       state    jobs", "a          done        1",
                                                      "long_rule  running    12"]


# ----------------------------------------------------------------------------------------------
# The smoke run: finished, cut mid-way, and running


DOCS_BEGIN, DOCS_END = "<!-- status-example:begin", "<!-- status-example:end -->"


def _fixture_log(workdir: Path) -> Path:
    """The smoke run's own Snakemake log: the first that planned jobs (other tests run Snakemake in its folder
    later; a dry run writes no plan to its log)."""
    return next(log for log in sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
                if "Job stats:" in log.read_text())


def _masked(line: str) -> list[str]:
    """A line's words with every number masked: what a run's status keeps from one run to the next."""
    return re.sub(r"\d+(\.\d+)?", "#", line).split()


def _documented_example(repo: Path) -> list[str]:
    text = (repo / "docs" / "cluster.md").read_text()
    block = text[text.index(DOCS_BEGIN):text.index(DOCS_END)]
    return block.split("```text\n", 1)[1].split("```", 1)[0].splitlines()


@pytest.mark.workflow
def test_the_status_of_the_finished_smoke_run_is_the_one_the_docs_show(smoke_run):
    repo, workdir, _ = smoke_run
    log = _fixture_log(workdir)
    lines = status(workdir, repo / "rules", log=log).splitlines()
    planned = sum(planned_jobs(log.read_text().splitlines()).values())
    assert lines[0] == f"Snakemake log .snakemake/log/{log.name}: ended; {planned} of {planned} jobs done"
    stages = status_rows(lines, "jobs per stage")
    assert stages.pop("stage") == ["planned", "done", "running", "failed", "interrupted", "left"]
    assert all(row[0] == row[1] and set(row[2:]) == {"0"} for row in stages.values()), stages
    trainings = status_rows(lines, "trainings:")
    trainings.pop("model")
    assert {"bn-4", "bn-64", "bn-4-s8", "gt-nanogpt"} <= set(trainings)
    for model, (state, iteration, *_rest, left) in trainings.items():
        info = json.loads((workdir / "results" / "models" / model / "config.json").read_text())
        assert (state, iteration, left) == ("done", f"{info['iterations']}/{info['train']['max_iters']}", "-")
    resources = repo_config("smoke.yaml")["resources"]
    asked = status_rows(lines, "asked for and used per rule")
    assert asked.pop("rule") == ["jobs", "runtime_min", "max_wall", "runtime_use", "mem_mb", "max_rss_mb", "mem_use"]
    assert asked["train_model"][1] == str(resources["runtime_min"]["train"])
    assert asked["train_model"][4] == str(resources["mem_mb"]["train"])
    assert all(row[6].endswith("%") for row in asked.values())  # every job measured its memory
    # the docs' example: the smoke run's status, numbers aside, its lines in order ("..." leaves lines out)
    masked = [_masked(line) for line in lines]
    position = 0
    for shown in _documented_example(repo):
        if shown.strip() == "...":
            continue
        assert _masked(shown) in masked[position:], f"docs/cluster.md's status example: {shown!r} is not printed"
        position = masked.index(_masked(shown), position) + 1


@pytest.mark.workflow
def test_the_status_of_the_smoke_run_cut_mid_way_through_a_training(smoke_run, tmp_path):
    """The smoke run's log cut just after a training started, that training's log with two rows so far, and the
    folders of the trainings finished by then: what a status read at that moment shows."""
    repo, workdir, _ = smoke_run
    log_lines = _fixture_log(workdir).read_text().splitlines(keepends=True)
    jobs = parse_snakemake_log(log_lines)
    training = next(job for job in sorted(jobs.values(), key=lambda job: job.end or job.start, reverse=True)
                    if job.rule == "train_model")  # the last to finish: others finish while it runs
    model = training.wildcards.split("=", 1)[1]
    head = next(i for i, line in enumerate(log_lines) if line.strip() == f"jobid: {training.jobid}")
    cut = next(i for i in range(head, len(log_lines)) if not log_lines[i].startswith("    "))  # its block's end
    run = tmp_path / "run"
    _write_run(run, "".join(log_lines[:cut]))
    cut_jobs = parse_snakemake_log(log_lines[:cut])
    (run / "results" / "models").mkdir(parents=True)
    (run / "results" / "benchmarks").symlink_to(workdir / "results" / "benchmarks")
    for job in cut_jobs.values():
        if job.rule == "train_model" and job.end is not None:
            name = job.wildcards.split("=", 1)[1]
            (run / "results" / "models" / name).symlink_to(workdir / "results" / "models" / name)
    rows = pd.read_csv(workdir / "results" / "models" / model / "train_log.csv").head(2).to_dict("records")
    settings = json.loads((workdir / "results" / "models" / model / "config.json").read_text())["train"]
    start_partial_log(run / "results" / "models" / model, [],
                      TrainConfig(max_iters=settings["max_iters"], eval_interval=settings["eval_interval"]), until=None)
    for row in rows:
        append_log_row(run / "results" / "models" / model, row)
    lines = status(run, repo / "rules").splitlines()
    assert ": running (its log last written" in lines[0]
    trainings = status_rows(lines, "trainings:")
    pace = (rows[1]["seconds"] - rows[0]["seconds"]) / (rows[1]["iteration"] - rows[0]["iteration"])
    assert trainings[model][:4] == ["running", f"{rows[1]['iteration']}/{settings['max_iters']}",
                                    f"{rows[1]['val_loss']:.4f}", f"{pace:.3f}"]
    assert all(row[0] == "done" for name, row in trainings.items() if name not in (model, "model"))
    stages = status_rows(lines, "jobs per stage")
    stages.pop("stage")
    done = sum(job.end is not None for job in cut_jobs.values() if job.rule != "all")
    running = sum(job.end is None for job in cut_jobs.values())
    assert stages["total"][1:3] == [str(done), str(running)] and int(stages["total"][-1]) > 0
    for stage, (planned, done, running, failed, interrupted, left) in stages.items():
        assert int(planned) == int(done) + int(running) + int(left) and failed == interrupted == "0", stage


@pytest.mark.workflow
def test_the_status_beside_a_running_workflow(tmp_path, repo):
    """A training of the smoke config made long, run by Snakemake: read while it runs, Snakemake's lock held, the
    status shows the rows its training log has so far."""
    override = tmp_path / "long.yaml"
    override.write_text("train:\n  max_iters: 100000\n")
    run = tmp_path / "run"
    command = snakemake_command(run, "--cores", "2", "results/models/bn-4/best.pt", overrides=[override])
    workflow = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    partial = run / "results" / "models" / "bn-4" / "train_log.partial.csv"
    try:
        deadline = time.monotonic() + 600
        while not (partial.exists() and len(partial.read_text().splitlines()) >= 3):  # the header and two rows
            assert workflow.poll() is None and time.monotonic() < deadline, workflow.stderr.read()
            time.sleep(0.5)
        assert sorted(p.name for p in (run / ".snakemake" / "locks").iterdir())  # Snakemake holds its lock
        lines = status(run, repo / "rules").splitlines()
        assert ": running (its log last written" in lines[0]
        state, iteration = status_rows(lines, "trainings:")["bn-4"][:2]
        done, of = map(int, iteration.split("/"))
        assert state == "running" and done >= 10 and of == 100000
        assert status_rows(lines, "jobs per stage")["train"][2] == "1"  # running
    finally:
        workflow.terminate()
        workflow.wait(timeout=120)
