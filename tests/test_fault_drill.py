"""The fault drill: on a copy of the finished smoke run, the accidents of a days-long run and their documented
recoveries (docs/testing.md, "The fault drill"), ending with outputs byte-identical to the untouched run and no
training rerun where none is needed."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
from pathlib import Path

import pandas as pd
import pytest
from workflow_helpers import planned_jobs, planned_rules, snakemake

# What may differ between two runs of the same jobs: logs, benchmarks, the report and the timings (Table I.1 and
# what it reads; a training's log has a seconds column, compared apart)
NOT_COMPARED = ("results/logs/", "results/benchmarks/", "results/timing/", "results/tables/table_i_1.csv",
                "results/report.html")
TRAIN_LOG = "train_log.csv"
DATA = ("train.bin", "val.bin", "eval_docs.parquet", "documents.parquet", "manifest.json", "shards.sha256")


def fingerprint(run: Path) -> dict[str, str]:
    """SHA-256 of every output of a run but its logs, benchmarks and timings."""
    files = sorted(p for p in (run / "results").rglob("*") if p.is_file())
    return {str(p.relative_to(run)): digest(p) for p in files if not str(p.relative_to(run)).startswith(NOT_COMPARED)}


def digest(path: Path) -> str:
    if path.name == TRAIN_LOG:  # all but its wall-clock seconds
        return hashlib.sha256(pd.read_csv(path).drop(columns="seconds").to_csv().encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def planned(run: Path, *args: str, overrides=()) -> tuple[set[str], str]:
    """The rules `snakemake -n` plans (Snakemake's own checks must pass), and its output."""
    result = snakemake(run, "-n", *args, overrides=overrides)
    output = result.stdout + result.stderr
    return planned_rules(output), output


def nothing_to_do(run: Path) -> bool:
    rules, output = planned(run, "all")
    return not rules and "Nothing to be done" in output


@pytest.fixture
def drill_run(smoke_run, tmp_path) -> Path:
    """A copy of the smoke run, file times and Snakemake's records included."""
    _, workdir, _ = smoke_run
    run = tmp_path / "run"
    shutil.copytree(workdir, run, symlinks=True)
    assert nothing_to_do(run)
    return run


@pytest.mark.workflow
def test_the_fault_drill(drill_run, tmp_path):
    run, data = drill_run, drill_run / "results" / "data"
    untouched = fingerprint(run)

    # 1. A bad data source (files that exist but are empty) fails before any job, naming the key; the corpus stays.
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "empty.txt").write_bytes(b"")
    override = tmp_path / "bad_source.yaml"
    override.write_text(f"data:\n  sources:\n    - {{kind: files, paths: ['{corpus}']}}\n")
    failed = snakemake(run, "all", overrides=[override], check=False)
    assert failed.returncode != 0
    assert "data.sources[0].paths: source 'files0': all 1 file(s) are empty" in failed.stderr
    assert "Select jobs to execute" not in failed.stdout + failed.stderr
    assert fingerprint(run) == untouched

    # 1'. The corpus deleted all the same (a data job that failed at run time; Snakemake removes a job's outputs
    # before it starts). Recovery: rebuild the data alone, then the run: identical shards retrain nothing.
    for name in DATA:
        (data / name).unlink()
    rules, output = planned(run, "all")
    assert {"prepare_corpus", "train_model"} <= rules  # Snakemake cannot know yet that the bytes will be the same
    snakemake(run, "results/data/manifest.json")
    assert nothing_to_do(run)

    # 2. A checkpoint damaged in place (its time kept): the next job that reads it fails naming it and the command
    # that rebuilds it; that command retrains this model alone, and everything after it comes out byte-identical
    # (TBAT files, figures and torch files included: no timings or dates in them).
    checkpoint = run / "results" / "models" / "bn-4" / "best.pt"
    stat, damaged = checkpoint.stat(), bytearray(checkpoint.read_bytes())
    damaged[len(damaged) // 2: len(damaged) // 2 + 64] = random.Random(1).randbytes(64)
    checkpoint.write_bytes(bytes(damaged))
    os.utime(checkpoint, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert nothing_to_do(run)  # older than what was computed from it: Snakemake does not look at it
    failed = snakemake(run, "-f", "results/tbat/bn-4.parquet", check=False)
    assert failed.returncode != 0
    log = (run / "results" / "logs" / "tbat" / "bn-4.log").read_text()
    advice = "snakemake all --forcerun results/models/bn-4/best.pt"
    assert "results/models/bn-4/best.pt: damaged: its member" in log and f"`{advice}`" in log, log[-2000:]
    rules, output = planned(run, *advice.split()[1:])
    assert {w for r, w in planned_jobs(output) if r == "train_model"} == {"model=bn-4"}
    snakemake(run, *advice.split()[1:])
    snakemake(run, "-f", "results/figures/figure_4_2.pdf")
    assert fingerprint(run) == untouched

    # 3. A touched shard, then every file's time scrambled (a copy or restore without times): nothing reruns.
    (data / "train.bin").touch()
    assert nothing_to_do(run)
    rng = random.Random(0)
    for path in (run / "results").rglob("*"):
        stamp = 1.7e9 + rng.uniform(0, 86400)
        os.utime(path, (stamp, stamp))
    assert nothing_to_do(run)

    # 3'. Shards whose bytes changed (their digest file says so): every training reruns, and what follows.
    digests = (data / "shards.sha256").read_text()
    (data / "shards.sha256").write_text(digests.replace(digests[:8], "0" * 8, 1))
    rules, output = planned(run, "all")
    trainings = {wildcards for rule, wildcards in planned_jobs(output) if rule == "train_model"}
    assert trainings == {"model=bn-4", "model=bn-4-s8", "model=bn-64", "model=bn-64-s8", "model=mos-4",
                         "model=gt-nanogpt"}
    assert "results/data/shards.sha256" in output
    (data / "shards.sha256").write_text(digests)  # the same bytes again, at a new time: nothing to do
    assert nothing_to_do(run)

    # 8. A temporary left beside an output by a killed job goes with the next write of that output.
    table = run / "results" / "tables" / "table_4_1.csv"
    stale = table.with_name(f".{table.name}.killed.tmp")
    stale.write_text("half")
    snakemake(run, "-f", "results/tables/table_4_1.csv")
    assert not stale.exists()

    assert nothing_to_do(run)
    assert fingerprint(run) == untouched
