import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from oversmooth.logs import log_to_file
from oversmooth.spectra import singular_entropy_gap, singular_values
from oversmooth.train import (
    PREEMPTED_EXIT_CODE,
    TrainConfig,
    TrainSpec,
    export_checkpoint,
    kept_weights_path,
    learning_rate,
    load_model,
    resume_path,
    train_model,
)

MODEL = dict(block_size=32, n_layer=1, n_head=2, n_embd=32, bottleneck=4)
TRAIN = dict(batch_size=4, grad_accum=2, max_iters=24, warmup_iters=3, eval_interval=6, eval_iters=2, learning_rate=3e-3, min_lr=3e-4, threads=1, seed=5)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(0)
    text = " ".join("the cat sat on the mat and the dog ran" for _ in range(400)).encode()
    noise = rng.integers(97, 123, size=2000, dtype=np.uint8).tobytes()
    (folder / "train.bin").write_bytes(text + noise)
    (folder / "val.bin").write_bytes(text[:4000])
    return folder


def _spec(shards, out, **changes):
    spec = TrainSpec(name="m", model=dict(MODEL), train=dict(TRAIN), train_bin=str(shards / "train.bin"), val_bin=str(shards / "val.bin"), out_dir=str(out))
    return replace(spec, **changes)


def _weights(path):
    return torch.load(path, weights_only=True)["model"]


def test_learning_rate_schedule_hand_values():
    cfg = TrainConfig(learning_rate=1.0, min_lr=0.1, warmup_iters=4, max_iters=14)
    assert learning_rate(0, cfg) == pytest.approx(0.2)
    assert learning_rate(3, cfg) == pytest.approx(0.8)
    assert learning_rate(4, cfg) == pytest.approx(1.0)
    assert learning_rate(9, cfg) == pytest.approx(0.1 + 0.5 * (1 + math.cos(math.pi * 0.5)) * 0.9)
    assert learning_rate(14, cfg) == pytest.approx(0.1)
    assert learning_rate(100, cfg) == pytest.approx(0.1)


def test_training_writes_checkpoints_and_log_and_learns(shards, tmp_path):
    state = train_model(_spec(shards, tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt", "config.json", "kept", "last.pt", "train_log.csv"]
    log = pd.read_csv(tmp_path / "train_log.csv")
    assert list(log.columns) == [
        "iteration", "tokens_seen", "train_loss", "val_loss", "lr", "seconds", "head_singular_entropy_gap",
    ]
    assert log["iteration"].tolist() == [0, 6, 12, 18, 24]
    # Godey et al.'s probe at every evaluation: log(width) - H(normalised spectrum) of the head, the final one
    # equal to the probe of the saved last.pt
    final = singular_entropy_gap(singular_values(load_model(tmp_path / "last.pt").output_matrix()))
    assert log["head_singular_entropy_gap"].iloc[-1] == pytest.approx(final, abs=1e-6)
    assert log["head_singular_entropy_gap"].between(0, math.log(4)).all()  # a 4-wide head
    assert log["tokens_seen"].iloc[-1] == 24 * 4 * 2 * 32
    assert log["val_loss"].iloc[-1] < log["val_loss"].iloc[0] - 0.2
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["best_val_loss"] == pytest.approx(log["val_loss"].min(), abs=1e-5)
    assert state.stopped == "reached max_iters=24"
    best = torch.load(tmp_path / "best.pt", weights_only=True)
    assert best["iteration"] == log.loc[log["val_loss"].idxmin(), "iteration"]
    assert load_model(tmp_path / "last.pt").config.bottleneck == 4


def test_same_config_gives_bit_identical_weights(shards, tmp_path):
    train_model(_spec(shards, tmp_path / "a"))
    train_model(_spec(shards, tmp_path / "b"))
    a, b = _weights(tmp_path / "a" / "last.pt"), _weights(tmp_path / "b" / "last.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_early_stopping_after_patience_evaluations(shards, tmp_path):
    # a learning rate this small cannot improve the rounded validation loss for long
    state = train_model(_spec(shards, tmp_path, train={**TRAIN, "learning_rate": 1e-9, "min_lr": 1e-9, "patience": 1, "max_iters": 600}))
    assert state.stopped.startswith("early stopping")
    assert state.iteration < 600


@pytest.mark.parametrize("stop_at", [5, 12])  # between evaluations, and right at one
def test_interrupted_and_resumed_training_matches_uninterrupted(shards, tmp_path, stop_at):
    train_model(_spec(shards, tmp_path / "full"))
    interrupted = _spec(shards, tmp_path / "resumed", stop_after_iters=stop_at)
    with pytest.raises(SystemExit) as exit_info:
        train_model(interrupted)
    assert exit_info.value.code == PREEMPTED_EXIT_CODE
    assert resume_path(tmp_path / "resumed").exists()
    assert not (tmp_path / "resumed" / "last.pt").exists()
    train_model(replace(interrupted, stop_after_iters=None))
    full, resumed = _weights(tmp_path / "full" / "last.pt"), _weights(tmp_path / "resumed" / "last.pt")
    assert all(torch.equal(full[k], resumed[k]) for k in full)
    assert _weights(tmp_path / "full" / "best.pt").keys() == _weights(tmp_path / "resumed" / "best.pt").keys()
    log_full = pd.read_csv(tmp_path / "full" / "train_log.csv").drop(columns="seconds")
    log_resumed = pd.read_csv(tmp_path / "resumed" / "train_log.csv").drop(columns="seconds")
    pd.testing.assert_frame_equal(log_full, log_resumed)
    assert not resume_path(tmp_path / "resumed").exists()


def test_kept_weights_at_an_iteration_are_those_of_a_run_stopped_there(shards, tmp_path):
    state = train_model(_spec(shards, tmp_path / "full", train={**TRAIN, "keep_weights_every": 2}))
    assert json.loads((tmp_path / "full" / "config.json").read_text())["kept_iterations"] == [0, 12, 24]
    assert sorted(p.name for p in (tmp_path / "full" / "kept").iterdir()) == ["0.pt", "12.pt", "24.pt"]
    with pytest.raises(SystemExit):  # the same run, stopped after 12 iterations: its resume state has its weights
        train_model(_spec(shards, tmp_path / "stopped", train={**TRAIN, "keep_weights_every": 2}, stop_after_iters=12))
    stopped = torch.load(resume_path(tmp_path / "stopped"), weights_only=False)["model"]
    export_checkpoint(tmp_path / "full", 12, tmp_path / "m@12" / "best.pt", "m@12")
    checkpoint = torch.load(tmp_path / "m@12" / "best.pt", weights_only=True)
    assert all(torch.equal(checkpoint["model"][k], stopped[k]) for k in stopped)
    assert checkpoint["name"] == "m@12" and checkpoint["iteration"] == 12
    assert checkpoint["val_loss"] == pytest.approx(next(r["val_loss"] for r in state.rows if r["iteration"] == 12), abs=1e-6)
    assert load_model(tmp_path / "m@12" / "best.pt").config.bottleneck == 4
    with pytest.raises(FileNotFoundError, match=r"m@18: the training of m kept no weights at iteration 18 \(kept at \[0, 12, 24\]"):
        export_checkpoint(tmp_path / "full", 18, tmp_path / "m@18" / "best.pt", "m@18")
    assert not (tmp_path / "m@18").exists()


def test_a_fresh_run_drops_weights_kept_by_a_run_with_other_settings(shards, tmp_path):
    train_model(_spec(shards, tmp_path, train={**TRAIN, "max_iters": 12}))
    stale = kept_weights_path(tmp_path, 12).read_bytes()
    train_model(_spec(shards, tmp_path, train={**TRAIN, "max_iters": 12, "seed": 6, "keep_weights_every": 0}))
    assert not kept_weights_path(tmp_path, 12).exists() and stale
    assert json.loads((tmp_path / "config.json").read_text())["kept_iterations"] == []


def test_resume_state_from_other_settings_is_ignored(shards, tmp_path):
    with pytest.raises(SystemExit):
        train_model(_spec(shards, tmp_path, stop_after_iters=8))
    state = train_model(_spec(shards, tmp_path, train={**TRAIN, "seed": 6}))
    assert state.rows[0]["iteration"] == 0  # started over


def _run_cli(spec, env=None, nproc=None):
    spec_file = os.path.join(spec.out_dir + "-spec.json")
    os.makedirs(spec.out_dir, exist_ok=True)
    with open(spec_file, "w") as f:
        json.dump(vars(spec), f)
    if nproc:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_port=29517", "-m", "oversmooth.train", spec_file]
    else:
        cmd = [sys.executable, "-m", "oversmooth.train", spec_file]
    return subprocess.Popen(cmd, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_sigterm_saves_and_exits_then_rerun_resumes(shards, tmp_path):
    """A real SIGTERM, as SLURM sends at preemption, to a real training process."""
    long_train = {**TRAIN, "max_iters": 4000, "eval_interval": 50}
    spec = _spec(shards, tmp_path / "job", train=long_train, log_file=str(tmp_path / "job.log"))
    proc = _run_cli(spec)
    deadline = time.time() + 120
    while "it 50/" not in (open(spec.log_file).read() if os.path.exists(spec.log_file) else ""):
        assert time.time() < deadline and proc.poll() is None, proc.stdout.read() if proc.poll() is not None else "timeout"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == PREEMPTED_EXIT_CODE
    assert resume_path(tmp_path / "job").exists()
    first_attempt = open(spec.log_file).read()
    assert "resume state saved" in first_attempt
    # a stop is logged as a stop, naming the signal: no error, no traceback
    assert "WARNING oversmooth: job stopped by SIGTERM (exit 143)" in first_attempt
    assert " ERROR " not in first_attempt and "Traceback" not in first_attempt
    resumed = torch.load(resume_path(tmp_path / "job"), weights_only=False)["state"]
    assert 50 <= resumed["iteration"] < 4000
    # rerun with a short budget that ends just after the interruption point: it continues, not restarts
    finish = _spec(shards, tmp_path / "job", train=long_train, stop_after_iters=resumed["iteration"] + 1)
    with pytest.raises(SystemExit), log_to_file(spec.log_file):
        train_model(finish)
    again = torch.load(resume_path(tmp_path / "job"), weights_only=False)["state"]
    assert again["iteration"] == resumed["iteration"] + 1
    # the retry appends to the same log: both attempts are there, in order
    both = open(spec.log_file).read()
    assert both.startswith(first_attempt) and both.count("==== attempt started") == 2
    assert f"resumed m at iteration {resumed['iteration']}" in both[len(first_attempt):]
    assert "job stopped by stop request (exit 143)" in both[len(first_attempt):]


def test_ddp_with_two_gloo_processes_matches_single_process(shards, tmp_path):
    """Two CPU processes (gloo) each take half of the micro-batches; the trajectory must match."""
    train = {**TRAIN, "grad_accum": 2, "max_iters": 12}
    single = train_model(_spec(shards, tmp_path / "single", train=train))
    proc = _run_cli(_spec(shards, tmp_path / "ddp", train=train), nproc=2, env={"OMP_NUM_THREADS": "1"})
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    ddp_log = pd.read_csv(tmp_path / "ddp" / "train_log.csv")
    single_log = pd.DataFrame(single.rows)
    np.testing.assert_allclose(ddp_log["val_loss"], single_log["val_loss"], rtol=1e-4)
    np.testing.assert_allclose(ddp_log["train_loss"], single_log["train_loss"], rtol=1e-4)
    a, b = _weights(tmp_path / "single" / "last.pt"), _weights(tmp_path / "ddp" / "last.pt")
    assert all(torch.allclose(a[k], b[k], atol=1e-4) for k in a)


def test_grad_accum_must_divide_among_processes(shards, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # do not start a process group
    with pytest.raises(ValueError, match=r"train.grad_accum \(2\) must be divisible by the number of processes \(3\)"):
        train_model(_spec(shards, tmp_path))
