"""Logging for workflow scripts: everything goes to the rule's `log:` file, appended attempt after attempt."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator

LOGGER_NAME = "oversmooth"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def get_logger(name: str) -> logging.Logger:
    """Logger under the package's namespace (`oversmooth.<name>`)."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


class JobStopped(SystemExit):
    """A job stopped on purpose (a signal from SLURM or the user, or a test's stop request): not a failure.

    Its exit status is 128 + the signal's number (143 for SIGTERM), as shells and SLURM report it.
    """

    def __init__(self, signum: int | None = None, detail: str = "", reason: str | None = None):
        self.signum = signum
        self.detail = detail
        self._reason = reason
        super().__init__(128 + (signum or signal.SIGTERM))

    @property
    def reason(self) -> str:
        """The signal's name, else the reason given (a deadline), else `stop request`."""
        return signal_name(self.signum) if self.signum else self._reason or signal_name(None)


def signal_name(signum: int | None) -> str:
    """`SIGTERM` for 15; `stop request` for None (a test's stop hook)."""
    return signal.Signals(signum).name if signum else "stop request"


def _raise_stopped(signum: int, frame) -> None:
    raise JobStopped(signum)


def process_age() -> float | None:
    """Seconds since this process started (Linux's /proc; None elsewhere)."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as up:
            fields, uptime = stat.read().rsplit(")", 1)[1].split(), float(up.read().split()[0])  # after the name
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in clock ticks
    except (OSError, ValueError, IndexError):
        return None


def cpu_seconds() -> tuple[float, float]:
    """(user, system) CPU seconds of this process and its finished children so far."""
    t = os.times()
    return t.user + t.children_user, t.system + t.children_system


@contextlib.contextmanager
def log_to_file(path: str | os.PathLike | None) -> Iterator[logging.Logger]:
    """Send the package's log records and Python warnings to `path` (appended) and stderr for the block.

    Each attempt starts with a header line, so the retries of a job read one after the other. SIGTERM and
    SIGINT become `JobStopped`, so `finally` blocks (temporary outputs) run; a stop is logged as a stop,
    naming the signal, and any other exception escaping the block is logged with its traceback.
    """
    root = logging.getLogger(LOGGER_NAME)
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if path is not None:
        os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="a"))
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    warnings_logger = logging.getLogger("py.warnings")
    for handler in handlers:
        warnings_logger.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in STOP_SIGNALS} if in_main else {}
    root.info("==== attempt started: pid %d on %s ====", os.getpid(), socket.gethostname())
    age, started = process_age(), time.monotonic()
    if age is not None:  # what the job paid before its work: Python, Snakemake's preamble and the imports
        root.info("start-up: %.2f s wall, %.2f CPU-s", age, sum(cpu_seconds()))
    try:
        yield root
    except JobStopped as stop:
        root.warning("job stopped by %s (exit %d)%s", stop.reason, stop.code, f": {stop.detail}" if stop.detail else "")
        raise
    except KeyboardInterrupt:
        root.warning("job stopped by SIGINT (keyboard interrupt)")
        raise
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            root.error("job exited with status %s", exit_.code)
        raise
    except BaseException:
        root.exception("job failed")
        raise
    finally:
        user, system = cpu_seconds()
        root.info("job ended: %.2f s wall, %.2f CPU-s user, %.2f CPU-s sys", time.monotonic() - started + (age or 0.0),
                  user, system)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        logging.captureWarnings(False)
        for handler in handlers:
            root.removeHandler(handler)
            warnings_logger.removeHandler(handler)
            handler.close()
