"""The run's status on a real one-node SLURM that the test starts on localhost: read beside the controller while a
training job runs (Snakemake's lock held), and after the run ends, with each rule's request beside its use. It needs
no smoke run. Skipped where SLURM cannot be stood up, except under OVERSMOOTH_REQUIRE_SLURM=1 (`.ci/run`)."""

from __future__ import annotations

import subprocess
import time

import pytest
from slurm_cluster import profile_command
from workflow_helpers import status_rows

from oversmooth.workflow.status import status

pytestmark = [pytest.mark.workflow, pytest.mark.slurm]

# 3,000 steps of the smoke's 1-layer model (30-45 s), evaluated every 500: a training one can watch
LONG_TRAINING = ("model_overrides:\n  bn-4:\n    train: {max_iters: 3000, eval_interval: 500, keep_weights_every: 0}\n"
                 "checkpoints: {iterations: []}\n")
TARGET = "results/models/bn-4/best.pt"


def test_the_status_of_a_slurm_run_while_it_runs_and_after_it_ends(cluster, tmp_path, repo):
    workdir = tmp_path / "run"
    workdir.mkdir()
    (workdir / "long.yaml").write_text(LONG_TRAINING)
    controller = subprocess.Popen(profile_command(workdir, TARGET, overrides=[workdir / "long.yaml"], timeout_s=900),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cluster.env)
    partial = workdir / "results" / "models" / "bn-4" / "train_log.partial.csv"
    deadline = time.monotonic() + 600
    while not (partial.exists() and len(partial.read_text().splitlines()) >= 3):  # the header and two rows
        if controller.poll() is not None or time.monotonic() > deadline:
            controller.kill()
            pytest.fail(f"no training rows before the run ended:\n{controller.stdout.read()[-6000:]}\n"
                        f"{cluster.logs()}")
        time.sleep(0.5)
    assert any((workdir / ".snakemake" / "locks").iterdir())  # the controller holds its lock
    running = status(workdir, repo / "rules").splitlines()
    output, _ = controller.communicate(timeout=600)
    assert controller.returncode == 0, output[-6000:]
    assert ": running (its log last written" in running[0]
    state, iteration = status_rows(running, "trainings:")["bn-4"][:2]
    assert state == "running" and int(iteration.split("/")[0]) >= 500 and iteration.endswith("/3000")
    assert status_rows(running, "jobs per stage")["train"][:4] == ["1", "0", "1", "0"]  # planned, done, running, failed

    ended = status(workdir, repo / "rules").splitlines()
    assert ended[0].endswith(": ended; 2 of 2 jobs done")
    assert status_rows(ended, "trainings:")["bn-4"][:2] == ["done", "3000/3000"]
    asked = status_rows(ended, "asked for and used per rule")
    # the SLURM profile's smoke requests (tests/slurm_cluster.py): 30 minutes and 2000 MB for a training
    assert asked["train_model"][:2] == ["1", "30"] and asked["train_model"][4] == "2000"
    assert asked["train_model"][3].endswith("%") and asked["train_model"][6].endswith("%")
