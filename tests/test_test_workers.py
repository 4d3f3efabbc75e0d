"""`make test`'s two pytest-xdist workers (`-n 2 --dist loadgroup`) under tests/conftest.py's hooks, on a small suite
of its own: the smoke run's tests and the SLURM file's on one worker, every other file's tests together, and each
worker on one thread."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from conftest import ONE_THREAD

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


def test_the_smoke_run_s_tests_and_the_slurm_file_share_one_worker_and_each_file_keeps_its_tests_together(tmp_path):
    (tmp_path / "conftest.py").write_text(SUITE_CONFTEST)
    for name in ("test_a.py", "test_b.py", "test_c.py", "test_slurm.py"):
        (tmp_path / name).write_text(SUITE_FILE)
    env = {k: v for k, v in os.environ.items() if k not in ONE_THREAD}  # `make test` has set them in this process
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                             "-q", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [line.split() for line in (tmp_path / "placed.txt").read_text().splitlines()]
    assert len(rows) == 4 * 6
    workers = defaultdict(set)
    for file, test, worker, threads in rows:
        shared = test.startswith("test_on_the_smoke_run") or file == "test_slurm.py"
        workers["smoke-run" if shared else file].add(worker)
        assert threads == "1"
    assert all(len(placed) == 1 for placed in workers.values()), dict(workers)
    assert len(set().union(*workers.values())) == 2  # the files spread over both workers
