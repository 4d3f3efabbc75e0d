"""`make test`'s two pytest-xdist workers (`-n 2 --dist loadgroup`) under tests/conftest.py's hooks, on a small suite
of its own: the smoke run's tests on one worker, the SLURM dispatch's last among them, every other file's tests
together, and each worker on one thread; and the lock by which two local SLURMs on one machine take turns."""

from __future__ import annotations

import os
import subprocess
import sys
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
pytest_configure = project.pytest_configure  # the hooks under test
pytest_collection_modifyitems = project.pytest_collection_modifyitems


@pytest.fixture(scope="session")
def smoke_run():  # stands in for the real one, which runs the smoke DAG
    return None


@pytest.fixture
def record(request, worker_id):
    import os
    with open(request.config.rootpath / "placed.txt", "a") as out:
        out.write(f"{{request.node.path.name}} {{request.node.name}} {{worker_id}} {{os.environ['OMP_NUM_THREADS']}}\\n")
"""

SUITE_FILE = """\
import pytest

@pytest.mark.parametrize("i", range(4))
def test_alone(record, i):
    pass

@pytest.mark.parametrize("i", range(2))
def test_on_the_smoke_run(record, smoke_run, i):
    pass
"""


def test_the_smoke_run_s_tests_share_one_worker_the_slurm_files_last_and_each_file_keeps_its_tests_together(tmp_path):
    (tmp_path / "conftest.py").write_text(SUITE_CONFTEST)
    for name in ("test_a.py", "test_slurm.py", "test_z.py"):  # test_z.py's smoke-run tests are collected after
        (tmp_path / name).write_text(SUITE_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}  # `make test` has set them in this process
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                             "-q", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split() for line in (tmp_path / "placed.txt").read_text().splitlines()]
    assert len(rows) == 3 * 6
    workers = defaultdict(set)
    for file, test, worker, threads in rows:
        workers["smoke-run" if test.startswith("test_on_the_smoke_run") else file].add(worker)
        assert threads == "1"
    assert all(len(placed) == 1 for placed in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2  # the files spread over both workers
    smoke_files = [file for file, test, _, _ in rows if test.startswith("test_on_the_smoke_run")]  # in running order
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
