import csv
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import RUN_OPTIONS

from oversmooth.core.catalog import segment_ends
from oversmooth.core.io import UnreadableInputError
from oversmooth.core.logs import log_to_file
from oversmooth.core.spectra import singular_entropy_gap, singular_values
from oversmooth.models.checkpoints import load_model
from oversmooth.models.model import GPT
from oversmooth.models.train import (
    LOG_COLUMNS,
    PREEMPTED_EXIT_CODE,
    Runtime,
    TrainConfig,
    TrainSpec,
    _load_resume,
    export_checkpoint,
    kept_weights_path,
    learning_rate,
    make_optimizer,
    resume_path,
    torchrun_command,
    train_model,
    train_step,
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



def test_a_damaged_resume_state_stops_the_job_naming_it_and_how_to_go_on(shards, in_a_run):
    out = Path("results/models/m")
    interrupted = _spec(shards, out, stop_after_iters=5)
    with pytest.raises(SystemExit):
        train_model(interrupted)
    state = resume_path(out)
    data = bytearray(state.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)  # torch.load would go on from these weights
    state.write_bytes(bytes(data))
    # the file as seen from the repository, where the command is typed; the job's output in the run's folder
    command = f"rm runs/r/{state} && snakemake {out}/best.pt {RUN_OPTIONS}"
    with pytest.raises(UnreadableInputError, match=r"resume.pt: damaged: .*CRC-32.* Delete it and rerun its job "
                                                   rf"alone: {re.escape(f'`{command}`, typed in {in_a_run}')}"):
        train_model(replace(interrupted, stop_after_iters=None))
    (in_a_run / "runs" / "r" / state).unlink()  # as the message says: the training starts again
    assert train_model(replace(interrupted, stop_after_iters=None)).iteration > 5


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
        cmd = torchrun_command(nproc, spec_file)
    else:
        cmd = [sys.executable, "-m", "oversmooth.models.train", spec_file]
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


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.device_count() < 2,
                    reason="where CUDA is present each process takes a GPU of its own: two need two GPUs")
def test_two_ddp_jobs_on_one_node_run_side_by_side_and_match_a_single_process(shards, tmp_path):
    """Two CPU processes (gloo) each take half of the micro-batches; the trajectory must match. Two such jobs start
    at once, as two SLURM jobs on one node would: torchrun's standalone rendezvous gives each its own free port
    (with the fixed default port the second job fails)."""
    train = {**TRAIN, "grad_accum": 2, "max_iters": 12}
    single = train_model(_spec(shards, tmp_path / "single", train=train))
    procs = [_run_cli(_spec(shards, tmp_path / f"ddp{i}", train=train), nproc=2, env={"OMP_NUM_THREADS": "1"})
             for i in range(2)]
    for proc in procs:
        output, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, output
    single_log = pd.DataFrame(single.rows)
    for i in range(2):
        ddp_log = pd.read_csv(tmp_path / f"ddp{i}" / "train_log.csv")
        np.testing.assert_allclose(ddp_log["val_loss"], single_log["val_loss"], rtol=1e-4)
        np.testing.assert_allclose(ddp_log["train_loss"], single_log["train_loss"], rtol=1e-4)
        a, b = _weights(tmp_path / "single" / "last.pt"), _weights(tmp_path / f"ddp{i}" / "last.pt")
        assert all(torch.allclose(a[k], b[k], atol=1e-4) for k in a)


def test_torchrun_command_runs_one_standalone_node():
    command = torchrun_command(4, "spec.json")
    assert command[1:3] == ["-m", "torch.distributed.run"] and "--standalone" in command
    assert "--nproc_per_node=4" in command and command[-3:] == ["-m", "oversmooth.models.train", "spec.json"]
    assert not any(arg.startswith(("--master_port", "--rdzv_endpoint")) for arg in command)


def test_grad_accum_must_divide_among_processes(shards, tmp_path, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)  # do not start a process group
    with pytest.raises(ValueError, match=r"train.grad_accum \(2\) must be divisible by the number of processes \(3\)"):
        train_model(_spec(shards, tmp_path))


def test_resume_state_is_read_onto_the_cpu_whatever_the_job_device(shards, tmp_path):
    """A GPU job's resume: torch.set_rng_state takes only a CPU ByteTensor, so a state loaded onto the job's device
    crashed every retry on CUDA. The meta device stands in for CUDA here."""
    with pytest.raises(SystemExit):
        train_model(_spec(shards, tmp_path, stop_after_iters=8))
    saved = torch.load(resume_path(tmp_path), weights_only=False)
    spec, runtime = _spec(shards, tmp_path), Runtime(torch.device("meta"))
    model = GPT(spec.model_config()).to(runtime.device)
    optimizer = make_optimizer(model, spec.train_config(), runtime)
    state, best = _load_resume(tmp_path, spec, model, optimizer, np.random.default_rng(0), runtime)
    assert state.iteration == 8 and best is not None
    assert torch.equal(torch.get_rng_state(), saved["torch_rng"])
    assert all(p.device.type == "meta" for p in model.parameters())


def _train_in_segments(shards, out, train, **changes):
    """Run a training the way rule train_segment + train_model do: one call per job, each handing its state on."""
    previous = None
    for end in segment_ends(train):
        state_out = str(out / "segments" / f"{end}.pt")
        train_model(_spec(shards, out, train=train, until=end, state_out=state_out, resume_from=previous, **changes))
        assert Path(state_out).exists() and not resume_path(out).exists()
        previous = state_out
    return train_model(_spec(shards, out, train=train, resume_from=previous, **changes))


@pytest.mark.parametrize("per_job", [6, 7])  # segments ending at evaluations, and between them
def test_training_in_segments_gives_the_weights_and_log_of_one_job(shards, tmp_path, per_job):
    train = {**TRAIN, "keep_weights_every": 2}
    train_model(_spec(shards, tmp_path / "one", train=train))
    segmented = {**train, "iters_per_job": per_job}
    assert len(segment_ends(segmented)) == math.ceil(24 / per_job) - 1
    _train_in_segments(shards, tmp_path / "jobs", segmented)
    for name in ("last.pt", "best.pt"):
        a, b = _weights(tmp_path / "one" / name), _weights(tmp_path / "jobs" / name)
        assert all(torch.equal(a[k], b[k]) for k in a), name
    log_one = pd.read_csv(tmp_path / "one" / "train_log.csv").drop(columns="seconds")
    pd.testing.assert_frame_equal(log_one, pd.read_csv(tmp_path / "jobs" / "train_log.csv").drop(columns="seconds"))
    kept = sorted(p.name for p in (tmp_path / "jobs" / "kept").iterdir())
    assert kept == sorted(p.name for p in (tmp_path / "one" / "kept").iterdir()) == ["0.pt", "12.pt", "24.pt"]


def test_a_segment_stopped_midway_resumes_from_its_own_state_not_the_segment_input(shards, tmp_path):
    train = {**TRAIN, "iters_per_job": 10}
    train_model(_spec(shards, tmp_path / "one", train=train))
    out = tmp_path / "jobs"
    first = str(out / "segments" / "10.pt")
    train_model(_spec(shards, out, train=train, until=10, state_out=first))
    with pytest.raises(SystemExit):  # the second job is stopped at iteration 15, as a time limit would
        train_model(_spec(shards, out, train=train, until=20, state_out=str(out / "segments" / "20.pt"),
                          resume_from=first, stop_after_iters=15))
    assert torch.load(resume_path(out), weights_only=False)["state"]["iteration"] == 15
    with log_to_file(tmp_path / "retry.log"):
        train_model(_spec(shards, out, train=train, until=20, state_out=str(out / "segments" / "20.pt"),
                          resume_from=first))
    assert "resumed m at iteration 15" in (tmp_path / "retry.log").read_text()
    train_model(_spec(shards, out, train=train, resume_from=str(out / "segments" / "20.pt")))
    a, b = _weights(tmp_path / "one" / "last.pt"), _weights(out / "last.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_resume_state_past_the_segment_end_is_not_used(shards, tmp_path):
    with pytest.raises(SystemExit):
        train_model(_spec(shards, tmp_path, stop_after_iters=15))
    state = train_model(_spec(shards, tmp_path, until=12, state_out=str(tmp_path / "12.pt")))
    assert state.iteration == 12 and state.rows[0]["iteration"] == 0  # trained from scratch up to the segment end


def test_an_early_stop_inside_a_segment_is_handed_on_to_the_last_job(shards, tmp_path):
    train = {**TRAIN, "learning_rate": 1e-9, "min_lr": 1e-9, "patience": 1, "max_iters": 600, "iters_per_job": 100}
    one = train_model(_spec(shards, tmp_path / "one", train=train))
    jobs = _train_in_segments(shards, tmp_path / "jobs", train)
    assert one.stopped.startswith("early stopping") and jobs.stopped == one.stopped
    assert jobs.iteration == one.iteration < 100


def test_segment_state_from_other_settings_is_an_error_naming_the_file(shards, tmp_path):
    state_out = str(tmp_path / "segments" / "12.pt")
    train_model(_spec(shards, tmp_path, until=12, state_out=state_out))
    with pytest.raises(ValueError, match=r"segment state .*12\.pt was written for other settings"):
        train_model(_spec(shards, tmp_path, train={**TRAIN, "seed": 6}, resume_from=state_out))


def test_scheduling_settings_leave_the_resume_fingerprint_alone(shards, tmp_path):
    base = _spec(shards, tmp_path)
    assert base.fingerprint() == _spec(shards, tmp_path, train={**TRAIN, "threads": 2, "iters_per_job": 5}).fingerprint()
    assert base.fingerprint() != _spec(shards, tmp_path, train={**TRAIN, "batch_size": 2}).fingerprint()


def test_a_job_past_its_deadline_saves_its_state_and_stops(shards, tmp_path):
    """The deadline a SLURM job sets itself before its time limit: state saved, exit 143, the retry goes on."""
    log_file = tmp_path / "train.log"
    with pytest.raises(SystemExit) as stopped, log_to_file(log_file):
        train_model(_spec(shards, tmp_path, stop_at=time.time() - 1))
    assert stopped.value.code == PREEMPTED_EXIT_CODE
    assert torch.load(resume_path(tmp_path), weights_only=False)["state"]["iteration"] == 1
    log = log_file.read_text()
    assert "stopping at iteration 1 on its deadline before the job's time limit" in log
    assert "job stopped by its deadline before the job's time limit (exit 143)" in log


def _one_step(model, x, y, runtime, compiled=False):
    """One `train_step`: its loss, the gradients it applied and the weights after it."""
    cfg = TrainConfig(**TRAIN)
    optimizer = make_optimizer(model, cfg, runtime)
    grads, step = {}, optimizer.step

    def capturing_step(*args, **kwargs):
        grads.update({n: p.grad.detach().clone() for n, p in model.named_parameters()})
        return step(*args, **kwargs)

    optimizer.step = capturing_step
    forward = torch.compile(model) if compiled else model
    loss = train_step(forward, model, model, optimizer, x, y, cfg, runtime)
    return loss, grads, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _step_inputs(shards):
    from oversmooth.models.model import sample_windows
    data = np.fromfile(shards / "train.bin", dtype=np.uint8)
    return sample_windows(data, np.random.default_rng(0), TRAIN["batch_size"] * TRAIN["grad_accum"], MODEL["block_size"])


def _fresh_model():
    from oversmooth.models.model import GPTConfig
    torch.manual_seed(0)
    return GPT(GPTConfig(**MODEL))


def test_a_compiled_training_step_on_cpu_matches_eager(shards):
    """thesis.yaml sets train.compile: one torch.compile step (inductor, CPU) against the same step eager."""
    x, y = _step_inputs(shards)
    runtime = Runtime(torch.device("cpu"))
    eager_loss, _, eager = _one_step(_fresh_model(), x, y, runtime)
    compiled_loss, _, compiled = _one_step(_fresh_model(), x, y, runtime, compiled=True)
    assert compiled_loss == pytest.approx(eager_loss, rel=1e-5)
    for k in eager:
        torch.testing.assert_close(compiled[k], eager[k], rtol=1e-4, atol=1e-5)


def test_a_bf16_training_step_on_cpu_stays_near_float32(shards):
    """The GPU path's bf16 autocast, run on CPU: the loss within 1 % of float32's, and every gradient the step
    applies within 5 % of float32's (relative L2 error), except those float32 puts at noise level (below 1e-4 of
    the largest: attention's key bias, whose true gradient is 0)."""
    x, y = _step_inputs(shards)
    fp32_loss, fp32, _ = _one_step(_fresh_model(), x, y, Runtime(torch.device("cpu")))
    bf16_loss, bf16, _ = _one_step(_fresh_model(), x, y, Runtime(torch.device("cpu"), bf16=True))
    assert bf16_loss != fp32_loss  # bf16 really ran
    assert bf16_loss == pytest.approx(fp32_loss, rel=0.01)
    largest = max(g.norm().item() for g in fp32.values())
    errors = {k: ((bf16[k] - g).norm() / g.norm()).item() for k, g in fp32.items() if g.norm() > 1e-4 * largest}
    assert len(errors) >= len(fp32) - 2 and max(errors.values()) <= 0.05, errors


# ----------------------------------------------------------------------------------------------
# The log as it goes: a whole row per evaluation in the partial log, continued by a resumed job and by the next
# segment's, written out as train_log.csv at the end


def _partial_log(out) -> Path:
    return Path(out) / "train_log.partial.csv"


def _partial_rows(out) -> list[int]:
    """The iterations of the partial log's rows; every line a whole one."""
    text = _partial_log(out).read_bytes().decode()
    assert text.endswith("\r\n") and text.startswith("iteration,tokens_seen,"), text
    return pd.read_csv(_partial_log(out))["iteration"].tolist()


def _old_log_bytes(rows) -> bytes:
    """train_log.csv as the training wrote it at its end before it wrote its log as it went."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=LOG_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue().encode()


def test_the_log_grows_a_whole_row_per_evaluation_as_the_training_goes(shards, tmp_path, monkeypatch):
    import oversmooth.models.train as training

    seen, estimate = [], training.estimate_loss

    def estimate_and_read_the_log(*args, **kwargs):  # at each evaluation, before its row: the rows so far
        if kwargs["seed"] == TRAIN["seed"] + 2:  # the validation loss, an evaluation's first
            seen.append(_partial_rows(tmp_path) if _partial_log(tmp_path).exists() else None)
        return estimate(*args, **kwargs)

    monkeypatch.setattr(training, "estimate_loss", estimate_and_read_the_log)
    state = train_model(_spec(shards, tmp_path))
    assert seen == [[], [0], [0, 6], [0, 6, 12], [0, 6, 12, 18]]
    # at the end: train_log.csv, byte for byte what the training wrote before, and no partial log left
    assert (tmp_path / "train_log.csv").read_bytes() == _old_log_bytes(state.rows)
    assert not _partial_log(tmp_path).exists() and not (tmp_path / "train_log.partial.json").exists()


def test_a_row_is_appended_in_one_write_and_synced(tmp_path, monkeypatch):
    import oversmooth.models.train as training

    training.start_partial_log(tmp_path, [], TrainConfig(**TRAIN), until=None)
    calls = []
    write, fsync = os.write, os.fsync
    monkeypatch.setattr(os, "write", lambda fd, data: calls.append(("write", bytes(data))) or write(fd, data))
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(("fsync", None)) or fsync(fd))
    row = {"iteration": 6, "tokens_seen": 1536, "train_loss": 2.5, "val_loss": 2.25, "lr": 0.001, "seconds": 1.25,
           "head_singular_entropy_gap": 0.125}
    training.append_log_row(tmp_path, row)
    assert calls == [("write", b"6,1536,2.5,2.25,0.001,1.25,0.125\r\n"), ("fsync", None)]
    assert _partial_rows(tmp_path) == [6]
    assert json.loads((tmp_path / "train_log.partial.json").read_text()) == {"max_iters": 24, "eval_interval": 6,
                                                                            "until": None}


def test_a_stopped_training_leaves_its_rows_and_its_retry_continues_the_file_without_duplicates(shards, tmp_path):
    train_model(_spec(shards, tmp_path / "full"))
    out = tmp_path / "resumed"
    with pytest.raises(SystemExit):  # stopped at iteration 15: its log read mid-training has the rows so far
        train_model(_spec(shards, out, stop_after_iters=15))
    assert _partial_rows(out) == [0, 6, 12]
    kept = _partial_log(out).read_bytes()
    # a row written after the last saved state (the job killed between the two), which the retry evaluates again
    with open(_partial_log(out), "ab") as log:
        log.write(b"18,9999,9.0,9.0,0.001,99.0,0.5\r\n")
    with pytest.raises(SystemExit):
        train_model(_spec(shards, out, stop_after_iters=20))
    assert _partial_log(out).read_bytes().startswith(kept)  # the rows up to the resume point kept, seconds and all
    assert _partial_rows(out) == [0, 6, 12, 18]
    train_model(_spec(shards, out))
    full = pd.read_csv(tmp_path / "full" / "train_log.csv").drop(columns="seconds")
    pd.testing.assert_frame_equal(full, pd.read_csv(out / "train_log.csv").drop(columns="seconds"))
    assert not _partial_log(out).exists()


def test_the_segments_of_a_training_grow_one_log(shards, tmp_path):
    train = {**TRAIN, "iters_per_job": 7}
    out, previous = tmp_path / "jobs", None
    for end, rows in zip(segment_ends(train), ([0, 6], [0, 6, 12], [0, 6, 12, 18])):
        state_out = str(out / "segments" / f"{end}.pt")
        train_model(_spec(shards, out, train=train, until=end, state_out=state_out, resume_from=previous))
        assert _partial_rows(out) == rows
        assert json.loads((out / "train_log.partial.json").read_text())["until"] == end
        previous = state_out
    state = train_model(_spec(shards, out, train=train, resume_from=previous))
    assert (out / "train_log.csv").read_bytes() == _old_log_bytes(state.rows)
    assert pd.read_csv(out / "train_log.csv")["iteration"].tolist() == [0, 6, 12, 18, 24]
    assert not _partial_log(out).exists()
