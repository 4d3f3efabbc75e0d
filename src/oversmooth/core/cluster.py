"""How jobs meet a cluster's scheduler: the settings that only shape a job, and when a job must be done (SLURM's
time limit)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from collections.abc import Callable, Mapping

from oversmooth.core.logs import get_logger

log = get_logger("cluster")

# Training settings that decide how a training runs, not what it computes: no part of its resume fingerprint or of
# a rule's params (a changed thread count reruns nothing; a changed iters_per_job replans the trainings it applies
# to, whose jobs' inputs change).
SCHEDULING_KEYS = ("threads", "iters_per_job")

# Job kinds, each with the config.resources key of its GPU count (None: a CPU job): training, fitting heads on a
# frozen model (minutes of GPU work), inference (evaluation, logits, sampling) and CPU analysis.
JOB_KINDS = {"train": "train_gpus", "head": "train_gpus", "inference": "inference_gpus", "cpu": None}

# BAT sampling's solver, seconds per sampled token of a token-track head at the ranks it was measured at, one core
# (benchmarks/bat_sampling_speed.py, docs/performance.md; 576: SmolLM2's own head, tok-full): what `make plan` prices
# and what a token head's BAT-sampling job asks SLURM for (`bat_sampling_runtime`).
TOKEN_BAT_SAMPLING_S = {64: 0.12, 576: 0.32}


def retry_memory(first_mb: int, attempt: int, max_mb: int) -> int:
    """Memory (MB) of a job's `attempt`-th try: the first attempt's times the attempt, at most `max_mb` (never less
    than the first attempt asked for)."""
    return min(first_mb * attempt, max(max_mb, first_mb))


def job_resources(settings: Mapping, kind: str) -> dict[str, int | str | Callable]:
    """What a job of `kind` (a JOB_KINDS key) asks the scheduler for, from config `resources` (`settings`).

    GPU jobs go to the GPU partition, the rest to the CPU partition; runtime and memory come from the kind's entry,
    memory growing with the attempt up to `max_mem_mb` (a job that ran out of memory asks for more on its retry).
    """
    if kind not in JOB_KINDS:
        raise KeyError(f"unknown job kind {kind!r}; one of {sorted(JOB_KINDS)}")
    gpus = settings[JOB_KINDS[kind]] if JOB_KINDS[kind] else 0
    first_mb, max_mb = settings["mem_mb"][kind], settings["max_mem_mb"]
    resources: dict[str, int | str | Callable] = {
        "gpu": gpus,
        "slurm_partition": settings["gpu_partition"] if gpus else settings["cpu_partition"],
        "mem_mb": lambda wildcards, attempt: retry_memory(first_mb, attempt, max_mb),
        "runtime": settings["runtime_min"][kind],
    }
    if gpus and settings["gpu_model"]:
        resources["gpu_model"] = settings["gpu_model"]
    if settings["account"]:
        resources["slurm_account"] = settings["account"]
    return resources


def rate_around(measured: Mapping[int, float], k: int) -> float:
    """A rate at rank k from rates measured at some ranks: the larger of the two measured around k (neither cost is
    monotone in k everywhere); beyond the measured ranks, the nearest one's."""
    ranks = sorted(measured)
    return max(measured[m] for m in [m for m in ranks if m <= k][-1:] + [m for m in ranks if m >= k][:1])


def token_bat_sampling_seconds(sampling: Mapping, k: int | None,
                               measured: Mapping[int, float] = TOKEN_BAT_SAMPLING_S) -> float:
    """BAT sampling's solver time for one BA method of a token-track head of rank k (None: the full head, at the
    largest measured rank's rate) in rule sample_bat, one core: config `tokens.sampling`'s prompts x their sampled
    tokens x the rate measured around k."""
    rate = rate_around(measured, max(measured) if k is None else k)
    return sampling["n_prompts"] * sampling["continuation_tokens"] * rate


def bat_sampling_runtime(seconds: float, floor_min: int, attempt: int) -> int:
    """Minutes a BAT-sampling job asks for: its estimated `seconds` x 1.5 x `attempt` (a retry of a job that ran
    out of time asks for more), at least the CPU jobs' `floor_min`."""
    return max(floor_min, math.ceil(1.5 * attempt * seconds / 60))


_TIME_LEFT = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def parse_time_left(text: str) -> float | None:
    """Seconds in squeue's `%L` (`[days-][hours:]minutes:seconds`); None for no limit (`UNLIMITED`, `NOT_SET`)."""
    match = _TIME_LEFT.match(text.strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def slurm_time_left(job_id: str) -> float | None:
    """Seconds before SLURM's time limit of job `job_id` (None: no limit, or squeue could not tell)."""
    try:
        out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%L"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError) as error:
        log.warning("cannot ask squeue for job %s's time left (%s): no deadline before its limit", job_id, error)
        return None
    return parse_time_left(out.splitlines()[0]) if out.strip() else None


def job_deadline(margin_s: float, environ: Mapping[str, str] = os.environ) -> float | None:
    """When a job should stop itself (a `time.time()` value): `margin_s` before its SLURM time limit, so that it
    saves its state before SIGTERM and SIGKILL; None outside SLURM or without a limit."""
    job_id = environ.get("SLURM_JOB_ID")
    if not job_id:
        return None
    left = slurm_time_left(job_id)
    if left is None:
        return None
    if margin_s > left / 2:
        log.warning("SLURM job %s: %.0f s left, less than twice the %.0f s margin; stopping halfway", job_id, left,
                    margin_s)
        margin_s = left / 2
    deadline = time.time() + left - margin_s
    log.info("SLURM job %s: %.0f s left; stopping to save %.0f s before the limit", job_id, left, margin_s)
    return deadline
