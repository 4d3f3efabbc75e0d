"""`make test`'s two pytest-xdist workers (`-n 2 --dist loadgroup`) under tests/conftest.py's hooks, on a small suite
of its own: the smoke run's tests on one worker, the SLURM dispatch's last among them, its readers' tests together,
every other file's tests together, and each worker on one thread; the smoke run made once for both workers; and the
lock by which two local SLURMs on one machine take turns."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import ONE_THREAD
from slurm_cluster import one_cluster_at_a_time

TESTS = Path(__file__).resolve().parent

SUITE_CONFTEST = f"""\
import importlib.util, sys
import pytest

sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("project_conftest", {str(TESTS / "conftest.py")!r})
project = importlib.util.module_from_spec(spec)
spec.loader.exec_module(project)
pytest_collection_modifyitems = project.pytest_collection_modifyitems  # the hooks under test


def pytest_configure(config):
    config.addinivalue_line("markers", "reads_smoke_run: as in the project's pyproject.toml")
    project.pytest_configure(config)


@pytest.fixture(scope="session")
def smoke_run():  # stands in for the real one, which runs the smoke DAG
    return None


@pytest.fixture
def record(request, worker_id):
    import os
    with open(request.config.rootpath / "placed.txt", "a") as out:
        out.write(f"{{request.node.path.name}} {{request.node.name}} {{request.node.nodeid.rpartition('@')[2]}} "
                  f"{{worker_id}} {{os.environ['OMP_NUM_THREADS']}}\\n")
"""

SUITE_FILE = """\
import pytest

@pytest.mark.parametrize("i", range(4))
def test_alone(record, i):
    pass

@pytest.mark.parametrize("i", range(2))
def test_on_the_smoke_run(record, smoke_run, i):
    pass

@pytest.mark.reads_smoke_run
def test_reading_the_smoke_run(record, smoke_run):
    pass
"""


def test_each_group_keeps_to_one_worker_the_smoke_runs_readers_apart_and_the_slurm_files_last(tmp_path):
    (tmp_path / "conftest.py").write_text(SUITE_CONFTEST)
    for name in ("test_a.py", "test_slurm.py", "test_z.py"):  # test_z.py's smoke-run tests are collected after
        (tmp_path / name).write_text(SUITE_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}  # `make test` has set them in this process
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                             "-q", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split() for line in (tmp_path / "placed.txt").read_text().splitlines()]
    assert len(rows) == 3 * 7
    workers = defaultdict(set)
    for file, test, group, worker, threads in rows:
        expected = {"test_on_the_smoke_run": "smoke-run", "test_reading_the_smoke_run": "smoke-run-readers"}
        assert group == expected.get(test.partition("[")[0], file), (file, test, group)
        workers[group].add(worker)
        assert threads == "1"
    assert set(workers) == {"smoke-run", "smoke-run-readers", "test_a.py", "test_slurm.py", "test_z.py"}
    assert all(len(placed) == 1 for placed in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2  # the groups spread over both workers
    smoke_files = [file for file, test, _, _, _ in rows if test.startswith("test_on_the_smoke_run")]  # in running order
    assert smoke_files == ["test_a.py"] * 2 + ["test_z.py"] * 2 + ["test_slurm.py"] * 2, smoke_files


def test_a_second_local_slurm_waits_for_the_first_and_gives_up_naming_the_lock(tmp_path):
    """`one_cluster_at_a_time` (the `cluster` fixture's): while one process holds the machine's local SLURM, another
    waits; past its timeout it fails naming the lock; once the first lets go, it gets it."""
    lock = tmp_path / "slurm.lock"
    holder = ("import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
              "from slurm_cluster import one_cluster_at_a_time\n"
              "with one_cluster_at_a_time(lock=Path(sys.argv[2])):\n"
              "    print('held', flush=True); sys.stdin.readline()\n")
    first = subprocess.Popen([sys.executable, "-c", holder, str(TESTS), str(lock)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        with pytest.raises(TimeoutError, match=str(lock)), one_cluster_at_a_time(timeout_s=2, lock=lock):
            pass
    finally:
        first.communicate("\n", timeout=60)  # the first lets go
    with one_cluster_at_a_time(timeout_s=2, lock=lock):
        pass


MAKER = """\
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from workflow_helpers import made_once

def make():
    with open(Path(sys.argv[2]) / "makers.txt", "a") as out:
        out.write(f"{os.getpid()}\\n")
    time.sleep(2)  # long enough for the other process to be waiting
    if sys.argv[3] == "fail":
        raise RuntimeError("snakemake all failed: the smoke run's error")
    return {"pid": os.getpid()}

try:
    print(json.dumps(made_once(Path(sys.argv[2]), "smoke-run", make, timeout_s=60)))
except BaseException as error:
    print(f"{type(error).__name__}: {error}")
"""


@pytest.mark.parametrize("outcome", ["made", "fail"])
def test_two_workers_share_one_smoke_run_and_its_failure(tmp_path, outcome):
    """`made_once` (the `smoke_run` fixture's under xdist): of two processes asking at once, one makes it and the other
    waits and reads what it made; a failure reaches the second as the first one's message, made nothing more."""
    command = [sys.executable, "-c", MAKER, str(TESTS), str(tmp_path), outcome]
    first = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "makers.txt").exists():  # the first holds the lock and is making it (its start-up varies)
        assert time.monotonic() < deadline and first.poll() is None, "the first process never started making it"
        time.sleep(0.05)
    second = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=120)
    first_out, _ = first.communicate(timeout=120)
    makers = (tmp_path / "makers.txt").read_text().split()
    assert makers == [str(first.pid)]  # made once, by the first
    if outcome == "made":
        assert first_out == second.stdout == f'{{"pid": {first.pid}}}\n'
    else:
        assert first_out.startswith("RuntimeError: snakemake all failed")
        failed = "Failed: smoke-run failed in the process that made it:\nRuntimeError: snakemake all failed"
        assert second.stdout.startswith(failed)
