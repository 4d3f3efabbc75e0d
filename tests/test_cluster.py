"""How jobs meet the scheduler: resources per job kind, memory on retries, the deadline before a time limit."""

import time

import pytest

from oversmooth.core import cluster
from oversmooth.core.cluster import job_deadline, job_resources, parse_time_left, retry_memory

SETTINGS = {
    "train_gpus": 2, "inference_gpus": 1, "gpu_partition": "gpu-a100", "cpu_partition": "compute", "gpu_model": "a100",
    "account": None, "max_mem_mb": 50000,
    "mem_mb": {"train": 32000, "head": 16000, "inference": 20000, "cpu": 8000},
    "runtime_min": {"train": 1440, "head": 120, "inference": 240, "cpu": 60},
}


def test_retried_jobs_ask_for_more_memory_up_to_the_cap():
    assert [retry_memory(20000, attempt, 50000) for attempt in (1, 2, 3)] == [20000, 40000, 50000]
    assert retry_memory(60000, 2, 50000) == 60000  # a first attempt above the cap keeps what it asked for


@pytest.mark.parametrize(("kind", "gpus", "partition", "runtime", "memory"), [
    ("train", 2, "gpu-a100", 1440, [32000, 50000]),
    ("head", 2, "gpu-a100", 120, [16000, 32000]),
    ("inference", 1, "gpu-a100", 240, [20000, 40000]),
    ("cpu", 0, "compute", 60, [8000, 16000]),
])
def test_each_job_kind_asks_for_its_own_partition_runtime_and_memory(kind, gpus, partition, runtime, memory):
    resources = job_resources(SETTINGS, kind)
    assert resources["gpu"] == gpus and resources["slurm_partition"] == partition
    assert resources["runtime"] == runtime
    assert [resources["mem_mb"](None, attempt) for attempt in (1, 2)] == memory
    assert ("gpu_model" in resources) == (gpus > 0) and "slurm_account" not in resources


def test_an_unknown_job_kind_is_named():
    with pytest.raises(KeyError, match="unknown job kind 'gpu'"):
        job_resources(SETTINGS, "gpu")


@pytest.mark.parametrize(("text", "seconds"), [
    ("0:45", 45), ("12:05", 725), ("1:00:00", 3600), ("2-03:04:05", 2 * 86400 + 3 * 3600 + 4 * 60 + 5),
    ("UNLIMITED", None), ("NOT_SET", None),
])
def test_squeue_time_left_is_read_in_seconds(text, seconds):
    assert parse_time_left(text) == seconds


def test_a_job_outside_slurm_has_no_deadline():
    assert job_deadline(600, environ={}) is None


def test_the_deadline_is_the_margin_before_the_time_limit(monkeypatch):
    monkeypatch.setattr(cluster, "slurm_time_left", lambda job_id: 3600.0 if job_id == "42" else None)
    assert job_deadline(600, environ={"SLURM_JOB_ID": "42"}) == pytest.approx(time.time() + 3000, abs=5)
    # a margin longer than half the time left would stop the job before it did anything: it stops halfway
    assert job_deadline(3000, environ={"SLURM_JOB_ID": "42"}) == pytest.approx(time.time() + 1800, abs=5)
    assert job_deadline(600, environ={"SLURM_JOB_ID": "7"}) is None  # no limit known
