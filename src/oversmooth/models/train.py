"""Training of byte-level GPTs (thesis §3.3): AdamW, warm-up + cosine decay, gradient accumulation,
periodic evaluation, early stopping, checkpoints that survive SIGTERM, and DDP through torchrun.

A training longer than one cluster job runs as segments (`train.iters_per_job`): each job trains up to the end of
its segment (`TrainSpec.until`) from the state the previous one handed on (`resume_from`) and hands its own on
(`state_out`); the last writes the model. A job also stops itself at `stop_at` (a deadline before its scheduler's
time limit), saving its resume state, so that its retry loses nothing.

Every `keep_weights_every`-th evaluation also keeps the weights of that moment (`kept_weights_path`), from which
`export_checkpoint` makes a model `<name>@<iteration>` of its own (oversmoothing along training).

The log grows as the training goes: each evaluation appends its row to `train_log.partial.csv` (`append_log_row`:
one write, synced), which every job of the training continues from its resume state and which becomes train_log.csv
at the end; `python -m oversmooth.workflow.status` reads it beside a running workflow.

Data order does not depend on the number of processes: every iteration draws `grad_accum`
micro-batches from one seeded stream, and with DDP rank r takes micro-batches r, r + W, ...; the
averaged gradient is then the single-process one. Everything that evolves (weights, optimizer,
data and dropout generators, counters, the log) is in the resume state, so a run interrupted and
resumed reaches the same final weights as one that was not.

Run as `python -m oversmooth.models.train SPEC.json` (or under `torchrun`); the Snakemake rule writes the spec.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from oversmooth.core.cluster import SCHEDULING_KEYS
from oversmooth.core.io import atomic_path, write_json
from oversmooth.core.layout import PARTIAL_TRAIN_LOG, PARTIAL_TRAIN_LOG_SETTINGS
from oversmooth.core.logs import JobStopped, get_logger, log_to_file, signal_name
from oversmooth.core.recovery import delete_and_rerun_advice, restore_advice
from oversmooth.core.spectra import singular_entropy_gap, singular_values
from oversmooth.data.corpus import read_shard
from oversmooth.models.model import GPT, GPTConfig, bf16_autocast, sample_windows
from oversmooth.models.torchfile import load_torch, save_torch

log = get_logger("train")

LOG_COLUMNS = ("iteration", "tokens_seen", "train_loss", "val_loss", "lr", "seconds", "head_singular_entropy_gap")
PREEMPTED_EXIT_CODE = 143  # 128 + SIGTERM, what SLURM and shells report for a terminated job


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (thesis footnote in §3.3 for the thesis values)."""

    batch_size: int = 16
    grad_accum: int = 1
    max_iters: int = 1000
    learning_rate: float = 3e-4
    min_lr: float = 3e-5
    warmup_iters: int = 100
    lr_decay_iters: int | None = None  # default: max_iters
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0
    eval_interval: int = 100
    eval_iters: int = 20
    patience: int = 5
    seed: int = 1234
    threads: int = 1
    compile: bool = False
    keep_weights_every: int = 1  # evaluations between the weights kept on disk (0: none)
    iters_per_job: int | None = None  # iterations per cluster job (None: the whole training in one job)


@dataclass
class TrainSpec:
    """Everything one training job needs; serialised to JSON for `python -m oversmooth.models.train`."""

    name: str
    model: dict
    train: dict
    train_bin: str
    val_bin: str
    out_dir: str
    log_file: str | None = None
    stop_after_iters: int | None = None  # testing aid: behave as if SIGTERM arrived after this iteration
    until: int | None = None  # a segment: train up to this iteration and write the state to `state_out`
    state_out: str | None = None
    resume_from: str | None = None  # the state the previous segment handed on
    stop_at: float | None = None  # deadline (time.time()): save the resume state and stop before the job's limit

    def model_config(self) -> GPTConfig:
        return GPTConfig(**self.model)

    def train_config(self) -> TrainConfig:
        return TrainConfig(**self.train)

    def fingerprint(self) -> str:
        """Hash of every setting that shapes the result; a resume state from other settings is not used."""
        train = {k: v for k, v in self.train.items() if k not in SCHEDULING_KEYS}
        key = json.dumps({"model": self.model, "train": train, "train_bin": self.train_bin}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass
class TrainState:
    """What changes during training, beyond the model and optimizer."""

    iteration: int = 0
    tokens_seen: int = 0
    best_val_loss: float = math.inf
    best_iteration: int = -1
    evals_without_improvement: int = 0
    stopped: str = ""
    rows: list[dict] = field(default_factory=list)


def learning_rate(it: int, cfg: TrainConfig) -> float:
    """Linear warm-up to `learning_rate`, then cosine decay to `min_lr` at `lr_decay_iters`."""
    decay_iters = cfg.lr_decay_iters or cfg.max_iters
    if it < cfg.warmup_iters:
        return cfg.learning_rate * (it + 1) / (cfg.warmup_iters + 1)
    if it >= decay_iters:
        return cfg.min_lr
    ratio = (it - cfg.warmup_iters) / max(1, decay_iters - cfg.warmup_iters)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (cfg.learning_rate - cfg.min_lr)


# ----------------------------------------------------------------------------------------------
# Device and distribution


@dataclass(frozen=True)
class Runtime:
    device: torch.device
    rank: int = 0
    world_size: int = 1
    bf16: bool | None = None  # bf16 autocast: None = on CUDA only (True: the same mixed precision on CPU)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def autocast(self):
        return bf16_autocast(self.device, self.bf16)


def setup_runtime(threads: int) -> Runtime:
    """CUDA when present (one device per torchrun process), else CPU with `threads`; DDP under torchrun."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if torch.cuda.is_available():
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.backends.cuda.matmul.allow_tf32 = True
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, threads))
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return Runtime(device, rank, world_size)


# ----------------------------------------------------------------------------------------------
# Checkpoints


def checkpoint_payload(model: GPT, state: TrainState, spec: TrainSpec, val_loss: float) -> dict:
    return {
        "name": spec.name,
        "model_config": model.config.to_dict(),
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "iteration": state.iteration,
        "tokens_seen": state.tokens_seen,
        "val_loss": val_loss,
    }


def torchrun_command(gpus: int, spec_file: str | os.PathLike) -> list[str]:
    """`python -m oversmooth.models.train SPEC` under torchrun on one node with `gpus` processes. `--standalone` gives
    each job its own rendezvous on a free port, so that two DDP jobs on one node do not collide."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1", f"--nproc_per_node={gpus}",
            "-m", "oversmooth.models.train", str(spec_file)]


def resume_path(out_dir: Path) -> Path:
    """Where the resume state lives: not a declared output, so Snakemake keeps it when a job fails."""
    return out_dir / "resume.pt"


def kept_weights_path(out_dir: str | os.PathLike, iteration: int) -> Path:
    """The weights a run kept at an evaluation: like the resume state, not a declared output (a retried job keeps
    those of its earlier attempts)."""
    return Path(out_dir) / "kept" / f"{iteration}.pt"


def drop_kept_weights(out_dir: str | os.PathLike) -> None:
    for stale in kept_weights_path(out_dir, 0).parent.glob("*.pt"):
        stale.unlink()


def export_checkpoint(train_dir: str | os.PathLike, iteration: int, out: str | os.PathLike, name: str) -> None:
    """The weights a finished run kept at `iteration`, as the checkpoint `best.pt` of a model `name` of its own."""
    info = json.loads((Path(train_dir) / "config.json").read_text())
    kept = kept_weights_path(train_dir, iteration)
    if iteration not in info.get("kept_iterations", []) or not kept.exists():
        raise FileNotFoundError(
            f"{name}: the training of {info['name']} kept no weights at iteration {iteration} (kept at "
            f"{info.get('kept_iterations', [])}; it ran {info['iterations']} iterations, {info['stopped']}); list only "
            "kept iterations in config `checkpoints.iterations` (multiples of train.eval_interval x "
            "train.keep_weights_every, before any early stop)"
        )
    payload = load_torch(kept, advice=restore_advice(kept, Path(train_dir) / "best.pt"))  # kept by the training
    save_torch({**payload, "name": name}, Path(out))


# ----------------------------------------------------------------------------------------------
# The training log, written as it goes


def partial_log_path(out_dir: str | os.PathLike) -> Path:
    """The log of a training in progress, a row per evaluation as it is made. Not a declared output (Snakemake
    deletes those before a job runs), so every job of one training (its segments, its retries) grows the same file;
    when the training ends it is written out as train_log.csv and removed."""
    return Path(out_dir) / PARTIAL_TRAIN_LOG


def partial_log_settings_path(out_dir: str | os.PathLike) -> Path:
    """Beside the partial log, for its readers: the iteration the training runs to (`max_iters`), its evaluation
    interval and the end of the running job's segment (`until`, null for the last job)."""
    return Path(out_dir) / PARTIAL_TRAIN_LOG_SETTINGS


def log_text(rows: Iterable[Mapping], header: bool = False) -> str:
    """Rows of the training log as CSV text, as train_log.csv holds them (the header first if `header`)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=LOG_COLUMNS)
    if header:
        writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def start_partial_log(out_dir: str | os.PathLike, rows: Sequence[Mapping], cfg: TrainConfig,
                      until: int | None) -> None:
    """Begin a job's partial log, atomically: the header and the rows of the state it resumes from (none from
    scratch). A resumed job so continues the file with the rows up to its resume point; a row that an earlier
    attempt wrote after its last saved state is dropped, as this job evaluates that iteration again."""
    write_json(partial_log_settings_path(out_dir),
               {"max_iters": cfg.max_iters, "eval_interval": cfg.eval_interval, "until": until})
    with atomic_path(partial_log_path(out_dir)) as tmp:
        tmp.write_bytes(log_text(rows, header=True).encode())


def append_log_row(out_dir: str | os.PathLike, row: Mapping) -> None:
    """Append one row to the partial log in a single write, synced to disk: a reader sees whole rows only."""
    path = partial_log_path(out_dir)
    data = log_text([row]).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        written = os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(f"{path}: wrote {written} of a row's {len(data)} bytes (is the disk full?)")


def drop_partial_log(out_dir: str | os.PathLike) -> None:
    partial_log_path(out_dir).unlink(missing_ok=True)
    partial_log_settings_path(out_dir).unlink(missing_ok=True)


# ----------------------------------------------------------------------------------------------
# The loop


class _Stop:
    """Remembers a SIGTERM/SIGINT so the loop can save and exit between iterations."""

    def __init__(self):
        self.signal: int | None = None

    def __call__(self, signum, frame):
        self.signal = signum

    def reason(self, spec: TrainSpec, state: TrainState) -> str:
        """Why this process should stop now ("" to go on): a signal, the job's deadline, or the test hook."""
        if self.signal is not None:
            return signal_name(self.signal)
        if spec.stop_at is not None and time.time() >= spec.stop_at:
            return "its deadline before the job's time limit"
        if spec.stop_after_iters is not None and state.iteration >= spec.stop_after_iters:
            return signal_name(None)
        return ""


@torch.no_grad()
def estimate_loss(model: torch.nn.Module, data: np.ndarray, cfg: TrainConfig, block_size: int, runtime: Runtime, seed: int) -> float:
    """Mean loss over `eval_iters` batches drawn by a generator of their own (the same batches every time)."""
    model.eval()
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(cfg.eval_iters):
        x, y = sample_windows(data, rng, cfg.batch_size, block_size)
        with runtime.autocast():
            _, loss = model(x.to(runtime.device), y.to(runtime.device))
        losses.append(loss.item())
    model.train()
    return float(np.mean(losses))


def train_model(spec: TrainSpec) -> TrainState:
    """Train (or resume) one model; write best.pt, last.pt, train_log.csv and config.json to `spec.out_dir`, and the
    log as it goes to `partial_log_path`."""
    cfg, model_cfg = spec.train_config(), spec.model_config()
    runtime = setup_runtime(cfg.threads)
    if cfg.grad_accum % runtime.world_size:
        raise ValueError(f"train.grad_accum ({cfg.grad_accum}) must be divisible by the number of processes ({runtime.world_size})")
    out_dir = Path(spec.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    train_data, val_data = read_shard(spec.train_bin), read_shard(spec.val_bin)

    torch.manual_seed(cfg.seed)
    model = GPT(model_cfg).to(runtime.device)
    optimizer = make_optimizer(model, cfg, runtime)
    data_rng = np.random.default_rng([cfg.seed, 1])
    state = TrainState()
    best_weights = None
    resumed = _load_resume(out_dir, spec, model, optimizer, data_rng, runtime)
    if resumed is not None:
        state, best_weights = resumed
        log.info("resumed %s at iteration %d (best val loss %.4f)", spec.name, state.iteration, state.best_val_loss)
    else:
        log.info("training %s from scratch: %d parameters, %s", spec.name, model.num_parameters(), model_cfg)
        if runtime.is_main:  # weights kept by an earlier run (other settings) must not pass for this one's
            drop_kept_weights(out_dir)
    if runtime.is_main:
        start_partial_log(out_dir, state.rows, cfg, spec.until)
    ddp_model = DistributedDataParallel(model) if runtime.world_size > 1 else model
    forward = torch.compile(ddp_model) if cfg.compile else ddp_model

    stop = _Stop()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    bytes_per_iter = cfg.batch_size * cfg.grad_accum * model_cfg.block_size
    start = time.time() - (state.rows[-1]["seconds"] if state.rows else 0.0)
    if spec.until is not None:
        log.info("%s: this job trains up to iteration %d of %d and hands its state on to %s", spec.name, spec.until,
                 cfg.max_iters, spec.state_out)
    try:
        while not state.stopped and (spec.until is None or state.iteration < spec.until):
            evaluated = bool(state.rows) and state.rows[-1]["iteration"] == state.iteration  # e.g. just resumed
            if not evaluated and (state.iteration % cfg.eval_interval == 0 or state.iteration >= cfg.max_iters):
                best_weights = _evaluate(model, val_data, train_data, cfg, runtime, state, start, spec, best_weights, optimizer, data_rng)
                if state.stopped:
                    break
            lr = learning_rate(state.iteration, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            x, y = sample_windows(train_data, data_rng, cfg.batch_size * cfg.grad_accum, model_cfg.block_size)
            train_step(forward, ddp_model, model, optimizer, x, y, cfg, runtime)
            state.iteration += 1
            state.tokens_seen += bytes_per_iter
            reason = _stop_reason(stop, spec, state, runtime)
            if reason:
                _save_state(resume_path(out_dir), spec, model, optimizer, data_rng, state, best_weights, runtime)
                log.warning("%s: stopping at iteration %d on %s; resume state saved to %s",
                            spec.name, state.iteration, reason, resume_path(out_dir))
                raise JobStopped(stop.signal, f"{spec.name} resumes from iteration {state.iteration} on its next attempt",
                                 reason=reason)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if spec.state_out is not None:
        _save_state(Path(spec.state_out), spec, model, optimizer, data_rng, state, best_weights, runtime)
        if runtime.is_main:
            resume_path(out_dir).unlink(missing_ok=True)
        log.info("%s: segment done at iteration %d; state handed on in %s", spec.name, state.iteration, spec.state_out)
    elif runtime.is_main:
        _write_final(out_dir, spec, model, state, best_weights)
    return state


def train_step(forward, ddp_model, model: GPT, optimizer, x: torch.Tensor, y: torch.Tensor, cfg: TrainConfig, runtime: Runtime) -> float:
    """One optimiser step over `grad_accum` micro-batches of x, y; this process takes its share of them.

    Gradients are synchronised once per step (DDP's `no_sync` on the other micro-batches).
    Returns this process's mean micro-batch loss.
    """
    micro_per_rank = cfg.grad_accum // runtime.world_size
    total = 0.0
    for micro in range(micro_per_rank):
        first = (micro * runtime.world_size + runtime.rank) * cfg.batch_size
        xb = x[first : first + cfg.batch_size].to(runtime.device, non_blocking=True)
        yb = y[first : first + cfg.batch_size].to(runtime.device, non_blocking=True)
        last = micro == micro_per_rank - 1
        sync = ddp_model.no_sync() if runtime.world_size > 1 and not last else nullcontext()
        with sync, runtime.autocast():
            _, loss = forward(xb, yb)
            (loss / micro_per_rank).backward()
        total += loss.item()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total / micro_per_rank


def make_optimizer(model: GPT, cfg: TrainConfig, runtime: Runtime) -> torch.optim.AdamW:
    """AdamW with decay on matrices only; fused kernels on CUDA."""
    return torch.optim.AdamW(
        _param_groups(model, cfg.weight_decay),
        lr=cfg.learning_rate,
        betas=(cfg.beta1, cfg.beta2),
        fused=runtime.device.type == "cuda",
    )


def _stop_reason(stop: _Stop, spec: TrainSpec, state: TrainState, runtime: Runtime) -> str:
    """Why to stop now ("" to go on): a signal received by any process, the deadline or the test hook; all ranks
    agree (the main rank names the reason when only another one has it)."""
    reason = stop.reason(spec, state)
    if runtime.world_size > 1:
        tensor = torch.tensor([int(bool(reason))], device=runtime.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        reason = reason or ("a stop on another process" if tensor.item() else "")
    return reason


def _evaluate(model, val_data, train_data, cfg, runtime, state, start, spec, best_weights, optimizer, data_rng):
    """Evaluate, log a row, keep the best weights, decide early stopping, save the resume state."""
    val_loss = estimate_loss(model, val_data, cfg, model.config.block_size, runtime, seed=cfg.seed + 2)
    train_loss = estimate_loss(model, train_data, cfg, model.config.block_size, runtime, seed=cfg.seed + 3)
    lr = learning_rate(min(state.iteration, cfg.max_iters), cfg)
    row = {
        "iteration": state.iteration,
        "tokens_seen": state.tokens_seen,
        "train_loss": round(train_loss, 6),
        "val_loss": round(val_loss, 6),
        "lr": lr,
        "seconds": round(time.time() - start, 3),
        "head_singular_entropy_gap": round(singular_entropy_gap(singular_values(model.output_matrix())), 6),
    }
    state.rows.append(row)
    if runtime.is_main:
        append_log_row(spec.out_dir, row)
    if runtime.is_main and _keeps_weights(state.iteration, cfg):
        kept = kept_weights_path(spec.out_dir, state.iteration)
        kept.parent.mkdir(exist_ok=True)
        save_torch(checkpoint_payload(model, state, spec, val_loss), kept)
    if val_loss < state.best_val_loss:
        state.best_val_loss, state.best_iteration = val_loss, state.iteration
        state.evals_without_improvement = 0
        best_weights = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    else:
        state.evals_without_improvement += 1
    log.info(
        "%s it %d/%d | %.2f MB seen | train %.4f | val %.4f | best %.4f @%d | lr %.2e | %.0f s",
        spec.name, state.iteration, cfg.max_iters, state.tokens_seen / 1e6, train_loss, val_loss,
        state.best_val_loss, state.best_iteration, lr, row["seconds"],
    )
    if state.evals_without_improvement >= cfg.patience:
        state.stopped = f"early stopping: no improvement in {cfg.patience} evaluations"
    elif state.iteration >= cfg.max_iters:
        state.stopped = f"reached max_iters={cfg.max_iters}"
    if state.stopped:
        log.info("%s: %s", spec.name, state.stopped)
    else:
        _save_state(resume_path(Path(spec.out_dir)), spec, model, optimizer, data_rng, state, best_weights, runtime)
    return best_weights


def _keeps_weights(iteration: int, cfg: TrainConfig) -> bool:
    """Whether the evaluation at `iteration` keeps the weights: every `keep_weights_every`-th of the regular ones,
    the first (the initialisation, iteration 0) included."""
    return cfg.keep_weights_every > 0 and iteration % (cfg.eval_interval * cfg.keep_weights_every) == 0


def kept_iterations(state: TrainState, cfg: TrainConfig) -> list[int]:
    return [row["iteration"] for row in state.rows if _keeps_weights(row["iteration"], cfg)]


def _param_groups(model: GPT, weight_decay: float) -> list[dict]:
    """Weight decay on matrices (2-D parameters) only, as in nanoGPT."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def _to_cpu(obj):
    """A state dict (nested dicts, lists, tensors) with every tensor on the CPU."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def _cuda_rng_by_rank(runtime: Runtime) -> list[torch.Tensor]:
    """Each process's CUDA generator state, by rank (dropout draws on every GPU); empty off CUDA. Collective under
    DDP: every rank calls it."""
    if runtime.device.type != "cuda":
        return []
    own = torch.cuda.get_rng_state(runtime.device)
    if runtime.world_size == 1:
        return [own]
    states: list = [None] * runtime.world_size
    dist.all_gather_object(states, own)
    return states


def _save_state(path: Path, spec, model, optimizer, data_rng, state, best_weights, runtime) -> None:
    """Everything that evolves, to resume from, every tensor on the CPU (any device can load it). Every rank calls
    it; the main rank writes."""
    cuda_rng = _cuda_rng_by_rank(runtime)
    if not runtime.is_main:
        return
    save_torch(
        {
            "fingerprint": spec.fingerprint(),
            "model": _to_cpu(model.state_dict()),
            "optimizer": _to_cpu(optimizer.state_dict()),
            "data_rng": data_rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "cuda_rng": cuda_rng,
            "state": asdict(state),
            "best_weights": best_weights,
        },
        path,
    )


def _job_output(spec: TrainSpec) -> Path:
    """The first output of the job that runs `spec`: a segment's state, or the trained model."""
    return Path(spec.state_out) if spec.state_out else Path(spec.out_dir) / "best.pt"


def _load_resume(out_dir, spec, model, optimizer, data_rng, runtime: Runtime):
    """The state to go on from: this job's own resume state (an earlier attempt stopped), else the state the
    previous segment handed on, else None (from scratch). Read onto the CPU whatever `runtime.device` is."""
    path = resume_path(out_dir)
    advice = (f"{delete_and_rerun_advice(path, _job_output(spec))}: the training goes on from the state its previous "
              "job handed on, or starts again")
    payload = load_torch(path, weights_only=False, advice=advice) if path.exists() else None
    if payload is not None and payload.get("fingerprint") != spec.fingerprint():
        log.warning("%s: ignoring %s, written for other settings", spec.name, path)
        payload = None
    if payload is not None and spec.until is not None and payload["state"]["iteration"] > spec.until:
        # e.g. train.iters_per_job changed during a training: it is overwritten at this job's first evaluation
        log.warning("%s: ignoring %s (iteration %d), past this segment's end %d", spec.name, path,
                    payload["state"]["iteration"], spec.until)
        payload = None
    if payload is None and spec.resume_from:
        path = Path(spec.resume_from)
        payload = load_torch(path, weights_only=False)
        if payload.get("fingerprint") != spec.fingerprint():
            raise ValueError(f"{spec.name}: the segment state {path} was written for other settings. "
                             f"{delete_and_rerun_advice(path, _job_output(spec))}: the training starts again from its "
                             "first segment")
    if payload is None:
        return None
    _restore(payload, model, optimizer, data_rng, runtime)
    return TrainState(**payload["state"]), payload["best_weights"]


def _restore(payload: dict, model: GPT, optimizer, data_rng: np.random.Generator, runtime: Runtime) -> None:
    """Load a state read onto the CPU: weights and optimizer moments move to the model's device; the random
    number generators' states stay CPU byte tensors, as torch.set_rng_state requires (on CUDA, each rank its own
    GPU's generator)."""
    model.load_state_dict(payload["model"])
    optimizer.load_state_dict(payload["optimizer"])
    data_rng.bit_generator.state = payload["data_rng"]
    torch.set_rng_state(payload["torch_rng"].cpu())
    if runtime.device.type == "cuda" and len(payload["cuda_rng"]) > runtime.rank:
        torch.cuda.set_rng_state(payload["cuda_rng"][runtime.rank].cpu(), runtime.device)


def _write_final(out_dir: Path, spec: TrainSpec, model: GPT, state: TrainState, best_weights: dict | None) -> None:
    """last.pt (final weights), best.pt (lowest validation loss), train_log.csv, config.json (with the iterations whose
    weights were kept); drop the resume state and the partial log."""
    last_val = state.rows[-1]["val_loss"] if state.rows else math.nan
    save_torch(checkpoint_payload(model, state, spec, last_val), out_dir / "last.pt")
    best = checkpoint_payload(model, state, spec, state.best_val_loss)
    best.update(model=best_weights, iteration=state.best_iteration)
    save_torch(best, out_dir / "best.pt")
    with atomic_path(out_dir / "train_log.csv") as tmp:
        tmp.write_bytes(log_text(state.rows, header=True).encode())
    write_json(
        out_dir / "config.json",
        {
            "name": spec.name,
            "model": spec.model,
            "train": spec.train,
            "parameters": model.num_parameters(),
            "best_iteration": state.best_iteration,
            "best_val_loss": state.best_val_loss,
            "iterations": state.iteration,
            "tokens_seen": state.tokens_seen,
            "stopped": state.stopped,
            "kept_iterations": kept_iterations(state, spec.train_config()),
        },
    )
    resume_path(out_dir).unlink(missing_ok=True)
    drop_partial_log(out_dir)


def main(argv: list[str] | None = None) -> int:
    """`python -m oversmooth.models.train SPEC.json`, alone or under torchrun."""
    argv = sys.argv[1:] if argv is None else argv
    spec = TrainSpec(**json.loads(Path(argv[0]).read_text()))
    rank = int(os.environ.get("RANK", "0"))
    with log_to_file(spec.log_file if rank == 0 else None):
        try:
            train_model(spec)
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
