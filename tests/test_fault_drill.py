"""The fault drill: on a copy of the finished smoke run in a run folder of its own (`--directory runs/drill`), the
accidents of a days-long run and their recoveries (docs/testing.md, "The fault drill"), each advised command followed
as printed, ending with outputs byte-identical to the untouched run and no training rerun where none is needed."""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pandas as pd
import pytest
from conftest import write_docs
from workflow_helpers import (
    SNAKEMAKE,
    follow_advice,
    planned_jobs,
    planned_rules,
    repository_copy,
    snakemake,
    snakemake_command,
)

# What may differ between two runs of the same jobs: logs, benchmarks, the report and the timings (Table I.1 and
# what it reads; a training's log has a seconds column, compared apart)
NOT_COMPARED = ("results/logs/", "results/benchmarks/", "results/timing/", "results/tables/table_i_1.csv",
                "results/report.html")
TRAIN_LOG = "train_log.csv"


def fingerprint(run: Path) -> dict[str, str]:
    """SHA-256 of every output of a run but its logs, benchmarks and timings."""
    files = sorted(p for p in (run / "results").rglob("*") if p.is_file())
    return {str(p.relative_to(run)): digest(p) for p in files if not str(p.relative_to(run)).startswith(NOT_COMPARED)}


def digest(path: Path) -> str:
    if path.name == TRAIN_LOG:  # all but its wall-clock seconds
        return hashlib.sha256(pd.read_csv(path).drop(columns="seconds").to_csv().encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


TEMPORARY = re.compile(r"results/models/[^/]+/segments/\d+\.pt")  # a training's hand-over states (temp)
RUN_FOLDER = "runs/drill"  # where the drill's run lies in its repository, the `--directory` of every command


@dataclass(frozen=True)
class Drill:
    """A copy of the finished smoke run in `runs/drill` of a copy of the repository: every command is typed in the
    repository's copy with `--directory runs/drill`, as a run of another config than the demo's is."""

    repo: Path
    env: dict[str, str]

    @property
    def run(self) -> Path:
        return self.repo / RUN_FOLDER

    def snakemake(self, *args: str, **kwargs):
        return snakemake(Path(RUN_FOLDER), *args, repo=self.repo, env=self.env, cwd=self.repo, **kwargs)

    def planned(self, *args: str, overrides=()) -> tuple[set[str], str]:
        """The rules `snakemake -n` plans (Snakemake's own checks must pass), and its output."""
        result = self.snakemake("-n", *args, overrides=overrides)
        output = result.stdout + result.stderr
        return planned_rules(output), output

    def nothing_to_do(self) -> bool:
        rules, output = self.planned("all")
        return not rules and "Nothing to be done" in output

    def missing(self) -> list[str]:
        """The outputs of the run's jobs that are not there (Snakemake's `--summary`), temporaries left out."""
        summary = self.snakemake("--summary").stdout
        rows = [line.split("\t") for line in summary.splitlines() if line.startswith("results/")]
        return [row[0] for row in rows if row[4] == "missing" and not TEMPORARY.fullmatch(row[0])]

    def complete(self) -> bool:
        """Every file of the run is there, and `all` has nothing to do."""
        return not self.missing() and self.nothing_to_do()

    def typed(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        """A snakemake command in the run's folder with no config file named: the run's config forgotten."""
        command = [str(SNAKEMAKE), "-s", str(self.repo / "Snakefile"), "--directory", RUN_FOLDER, *args]
        return subprocess.run(command, cwd=self.repo, env=self.env, capture_output=True, text=True, timeout=600,
                              **kwargs)

    def log(self, *parts: str) -> str:
        return self.run.joinpath("results", "logs", *parts).read_text()


@pytest.fixture
def drill(smoke_run, tmp_path) -> Drill:
    """The smoke run copied with its file times and Snakemake's records into a repository's copy."""
    _, workdir, _ = smoke_run
    repo, env = repository_copy(tmp_path)
    shutil.copytree(workdir, repo / RUN_FOLDER, symlinks=True)
    drill = Drill(repo, env)
    assert drill.complete()
    return drill


def damage_in_place(path: Path, n: int = 64) -> None:
    """Overwrite `n` bytes in the middle of `path` with random ones, keeping its size and time (a bad disk)."""
    stat, damaged = path.stat(), bytearray(path.read_bytes())
    damaged[len(damaged) // 2: len(damaged) // 2 + n] = random.Random(1).randbytes(n)
    path.write_bytes(bytes(damaged))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def files_source(folder: Path) -> str:
    """An override whose corpus is the files of `folder`."""
    return f"data:\n  sources:\n    - {{kind: files, paths: ['{folder}']}}\n"


def attempt_started_since(job_log: Path, moment: datetime) -> bool:
    """Whether a job's log has an attempt that started after `moment` (its `==== attempt started` line's time)."""
    if not job_log.exists():
        return False
    starts = [line[:23] for line in job_log.read_text(errors="replace").splitlines() if "==== attempt started" in line]
    return bool(starts) and datetime.strptime(starts[-1], "%Y-%m-%d %H:%M:%S,%f") > moment


@pytest.mark.workflow
def test_the_fault_drill(drill, tmp_path):
    run, data = drill.run, drill.run / "results" / "data"
    untouched = fingerprint(run)
    override = tmp_path / "override.yaml"

    # 1. Bad inputs fail before any job, naming the key, and nothing is deleted: files that exist but are empty,
    # binary files (a pipeline Parquet file as a source, and its bytes named .txt: "no text column" or an empty split
    # at job time), prompts longer than every document of the corpus built for the config (a PromptError at job time).
    empty, binary = write_docs(tmp_path / "empty", {"empty.txt": b""}), tmp_path / "binary"
    write_docs(binary, {name: (data / "documents.parquet").read_bytes() for name in ("a.parquet", "a.txt")})
    for bad, message in [
        (files_source(empty), "data.sources[0].paths: source 'files0': all 1 file(s) are empty"),
        (files_source(binary), "data.sources[0].paths: 2 of 2 file(s) are not text of their format"),
        ("eval:\n  window: 1000000\n", "eval.window: prompts of 1000000 bytes"),
    ]:
        override.write_text(bad)
        failed = drill.snakemake("all", overrides=[override], check=False)
        assert failed.returncode != 0 and message in failed.stderr, failed.stderr[-2000:]
        assert "Select jobs to execute" not in failed.stdout + failed.stderr
    assert fingerprint(run) == untouched

    # 1'. A source only the data job can refuse (one document: two splits left empty). Snakemake deleted the corpus
    # before the job ran: `all` would plan every training now. The error names what was deleted and the command
    # that rebuilds it alone; with the config fixed, that command is the data job, and then nothing is left to do
    # (the same bytes retrain nothing).
    override.write_text(files_source(write_docs(tmp_path / "one", {"a.txt": "One document."})))
    assert drill.snakemake("results/data/manifest.json", overrides=[override], check=False).returncode != 0
    log = drill.log("data", "prepare_corpus.log")
    assert "received no document" in log and "deleted this job's outputs before it ran (results/data/train.bin" in log
    assert {"prepare_corpus", "train_model"} <= drill.planned("all")[0]
    override.write_text("{}\n")  # the config fixed: the advice names the run's config files
    jobs, command = follow_advice(log, drill.env)
    assert f"--directory {RUN_FOLDER} --cores 2 --configfile config/smoke.yaml {override}" in command
    assert jobs == [("prepare_corpus", "")]
    assert drill.complete()

    # 2. A checkpoint damaged in place (its time kept): the next job that reads it fails naming it and the command
    # that rebuilds it alone, in the run's folder (`snakemake all --forcerun <file>`, typed in the repository, planned
    # 53 demo jobs that retrained the repository's own model). It retrains this model alone; the run's command then
    # reruns the job that failed and what reads its output, and the training log's readers (its seconds column).
    # Everything comes out byte-identical (TBAT files, figures and torch files included: no times or dates in them),
    # and nothing is written in the repository's own folder.
    checkpoint = run / "results" / "models" / "bn-4" / "best.pt"
    damage_in_place(checkpoint)
    assert drill.complete()  # older than what was computed from it: Snakemake does not look at it
    assert drill.snakemake("-f", "results/tbat/bn-4.parquet", check=False).returncode != 0
    log = drill.log("tbat", "bn-4.log")
    assert "results/models/bn-4/best.pt: damaged: its member" in log
    jobs, command = follow_advice(log, drill.env)
    assert command.startswith("snakemake results/models/bn-4/best.pt --forcerun results/models/bn-4/best.pt "
                              f"--directory {RUN_FOLDER} ")
    assert jobs == [("train_model", "model=bn-4")]
    assert drill.planned("all")[0] == {"tbat", "metrics_table", "loss_matched", "figure_loss_matched", "findings",
                                       "training_figure", "all"}
    drill.snakemake("all")
    drill.snakemake("-f", "results/figures/figure_4_2.pdf")
    assert not (drill.repo / "results").exists()
    assert fingerprint(run) == untouched

    # 2'. A training's resume state damaged (what a stopped job leaves, then a bad disk): the training fails naming
    # it and the command that deletes it and reruns that training alone.
    resume = checkpoint.with_name("resume.pt")
    shutil.copyfile(checkpoint, resume)
    damage_in_place(resume)
    assert drill.snakemake("-f", "results/models/bn-4/best.pt", check=False).returncode != 0
    log = drill.log("train", "bn-4.log")
    assert "results/models/bn-4/resume.pt: damaged: its member" in log
    jobs, command = follow_advice(log, drill.env)
    assert command.startswith(f"rm {RUN_FOLDER}/results/models/bn-4/resume.pt && snakemake results/models/bn-4/best.pt")
    assert jobs == [("train_model", "model=bn-4")] and not resume.exists()
    # the training log's readers (its seconds column) and what reads theirs, alone
    assert drill.planned("all")[0] == {"training_figure", "loss_matched", "figure_loss_matched", "findings", "all"}
    drill.snakemake("all")
    assert drill.complete() and fingerprint(run) == untouched

    # 3. A byte shard damaged in place (its size and time kept): nothing reruns on its account (it is ancient(), its
    # digest file unchanged); the next job that reads it fails naming it and the command that rebuilds it alone,
    # the data job (`snakemake all --forcerun <shard>` retrained every model: 216 demo jobs); then the run's command
    # reruns the job that failed alone.
    damage_in_place(data / "train.bin", n=1)
    assert drill.complete()
    assert drill.snakemake("-f", "results/tables/table_godey_ngram_rank.csv", check=False).returncode != 0
    log = drill.log("rank", "ngram_rank.log")
    assert "results/data/train.bin: damaged: its SHA-256 is not the one recorded in" in log
    jobs, command = follow_advice(log, drill.env)
    assert command.startswith("snakemake results/data/train.bin --forcerun results/data/train.bin ")
    assert jobs == [("prepare_corpus", "")]
    assert drill.planned("all")[0] == {"ngram_rank", "all"}
    drill.snakemake("all")
    assert drill.complete() and fingerprint(run) == untouched

    # 4. A touched shard, then every file's time scrambled (a copy or restore without times): nothing reruns.
    (data / "train.bin").touch()
    assert drill.complete()
    rng = random.Random(0)
    for path in (run / "results").rglob("*"):
        stamp = 1.7e9 + rng.uniform(0, 86400)
        os.utime(path, (stamp, stamp))
    assert drill.complete()

    # 4'. Shards whose bytes changed (their digest file says so): every training reruns, and what follows.
    digests = (data / "shards.sha256").read_text()
    (data / "shards.sha256").write_text(digests.replace(digests[:8], "0" * 8, 1))
    rules, output = drill.planned("all")
    trainings = {wildcards for rule, wildcards in planned_jobs(output) if rule == "train_model"}
    assert trainings == {"model=bn-4", "model=bn-4-s8", "model=bn-64", "model=bn-64-s8", "model=mos-4",
                         "model=gt-nanogpt"}
    assert "results/data/shards.sha256" in output
    (data / "shards.sha256").write_text(digests)  # the same bytes again, at a new time: nothing to do
    assert drill.complete()

    # 5. A temporary left beside an output by a killed job goes with the next write of that output.
    table = run / "results" / "tables" / "table_4_1.csv"
    stale = table.with_name(f".{table.name}.killed.tmp")
    stale.write_text("half")
    drill.snakemake("-f", "results/tables/table_4_1.csv")
    assert not stale.exists()

    # 6. The run's folder given another config (the config forgotten, or another run's): refused before any job,
    # naming the config files the run was made with and the override; the override passes (dry: nothing recorded).
    for forgotten in [(), ("--configfile", "config/config.yaml")]:
        refused = drill.typed("-n", "all", "--cores", "2", *forgotten)
        said = refused.stdout + refused.stderr  # Snakemake prints a Snakefile's error on stdout
        assert refused.returncode != 0 and "Select jobs to execute" not in said
        assert "was made with the config files config/smoke.yaml" in said, said[-2000:]
        assert "--config replace_run_config=true" in said
    replaced = drill.typed("-n", "all", "--cores", "2", "--config", "replace_run_config=true")
    assert replaced.returncode == 0 and "train_model" in planned_rules(replaced.stdout + replaced.stderr)
    assert "config/smoke.yaml" in (run / "results" / "run_config.yaml").read_text()

    # 7. A deleted intermediate result, whose readers are up to date: `all` rebuilds it (Snakemake alone would not).
    (run / "results" / "eval" / "bn-4.json").unlink()
    assert ("evaluate_model", "model=bn-4") in planned_jobs(drill.planned("all")[1])
    drill.snakemake("all")
    assert drill.complete() and fingerprint(run) == untouched

    # 8. A recovery command interrupted (Ctrl-C) once Snakemake has deleted its output and started its job (a signal
    # between the two, before the job's process exists, Snakemake may pass over): `all` rebuilds it.
    samples = run / "results" / "samples" / "bn-4.parquet"
    target = "results/samples/bn-4.parquet"
    command = snakemake_command(Path(RUN_FOLDER), "--cores", "2", target, "--forcerun", target, repo=drill.repo)
    launched = datetime.now()
    recovery = subprocess.Popen(command, cwd=drill.repo, env=drill.env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    job_log = run / "results" / "logs" / "samples" / "bn-4.log"
    while ((samples.exists() or not attempt_started_since(job_log, launched)) and recovery.poll() is None
           and time.monotonic() < deadline):
        time.sleep(0.02)
    assert recovery.poll() is None, "the recovery command ended before it could be interrupted"
    os.killpg(recovery.pid, signal.SIGINT)
    assert recovery.wait(timeout=300) != 0 and not samples.exists()
    assert ("sample_with_bat", "model=bn-4") in planned_jobs(drill.planned("all")[1])  # bn-4 samples BAT methods
    drill.snakemake("all")
    assert drill.complete() and fingerprint(run) == untouched
