"""Job logs: a deliberate stop is logged as a stop naming its signal, attempts append, a failure keeps its traceback."""

import signal
import subprocess
import sys

import pytest

from oversmooth.core.logs import JobStopped, log_to_file

# A job that holds a half-written atomic output when the signal arrives. It works in short steps, as a job does:
# the kernel may hand SIGTERM to another thread (OpenBLAS's, jemalloc's), and Python runs the handler only when the
# main thread next executes bytecode, so one long time.sleep would hold the stop back for its whole length.
JOB = """
import sys, time
from oversmooth.core.io import atomic_path
from oversmooth.core.logs import log_to_file
with log_to_file(sys.argv[1]):
    with atomic_path(sys.argv[2]) as tmp:
        tmp.write_text("half")
        print("ready", flush=True)
        for _ in range(600):
            time.sleep(0.1)
"""


def _stop_job(tmp_path, signum):
    proc = subprocess.Popen([sys.executable, "-c", JOB, str(tmp_path / "job.log"), str(tmp_path / "out.txt")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signum)
    return proc.wait(timeout=30)


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_is_logged_as_a_stop_and_leaves_no_partial_output(tmp_path, signum, code):
    assert _stop_job(tmp_path, signum) == code
    text = (tmp_path / "job.log").read_text()
    assert f"WARNING oversmooth: job stopped by {signal.Signals(signum).name} (exit {code})" in text
    assert "ERROR" not in text and "Traceback" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log"]  # no output, no temporary file


def test_attempts_append_to_the_log(tmp_path):
    _stop_job(tmp_path, signal.SIGTERM)
    _stop_job(tmp_path, signal.SIGTERM)
    text = (tmp_path / "job.log").read_text()
    assert text.count("==== attempt started") == 2 and text.count("job stopped by SIGTERM") == 2


def test_a_failure_is_logged_with_its_traceback(tmp_path):
    log = tmp_path / "job.log"
    with pytest.raises(ZeroDivisionError), log_to_file(log):
        1 / 0
    text = log.read_text()
    assert "ERROR oversmooth: job failed" in text and "ZeroDivisionError" in text


def test_a_stop_request_without_a_signal_is_named(tmp_path):
    log = tmp_path / "job.log"
    with pytest.raises(JobStopped) as stop, log_to_file(log):
        raise JobStopped(None, "test hook")
    assert stop.value.code == 143
    assert "job stopped by stop request (exit 143): test hook" in log.read_text()


# A workflow script's job: an output, a line on stdout left in its buffer, and a shutdown hook that marks the end.
WORKFLOW_JOB = """
import atexit, pathlib, sys
from oversmooth.core.io import atomic_path
from oversmooth.core.job import workflow_job
atexit.register(lambda: pathlib.Path(sys.argv[2] + ".shutdown").write_text("ran"))
with workflow_job(sys.argv[1]):
    with atomic_path(sys.argv[2]) as tmp:
        tmp.write_text("done")
    sys.stdout.write("buffered")
    if sys.argv[3] == "fail":
        1 / 0
"""


@pytest.mark.parametrize("outcome", ["succeed", "fail"])
def test_a_workflow_job_ends_its_process_on_success_and_shuts_down_as_usual_on_failure(tmp_path, outcome):
    out, log = tmp_path / "out.txt", tmp_path / "job.log"
    result = subprocess.run([sys.executable, "-c", WORKFLOW_JOB, str(log), str(out), outcome], check=False,
                            capture_output=True, text=True, timeout=60)
    text = log.read_text()
    assert out.read_text() == "done" and result.stdout == "buffered" and "job ended:" in text
    if outcome == "succeed":  # exit status 0, and Python's shutdown (its atexit hooks among it) skipped
        assert result.returncode == 0 and not (tmp_path / "out.txt.shutdown").exists()
    else:
        assert result.returncode == 1 and (tmp_path / "out.txt.shutdown").read_text() == "ran"
        assert "ERROR oversmooth: job failed" in text and "ZeroDivisionError" in result.stderr
