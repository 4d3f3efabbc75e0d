"""Logging for workflow scripts: everything goes to the rule's `log:` file."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

LOGGER_NAME = "oversmooth"


def get_logger(name: str) -> logging.Logger:
    """Logger under the package's namespace (`oversmooth.<name>`)."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}")


@contextlib.contextmanager
def log_to_file(path: str | os.PathLike | None) -> Iterator[logging.Logger]:
    """Send the package's log records and Python warnings to `path` (and stderr) for the block.

    An exception escaping the block is logged with its traceback before it propagates, so the
    rule's log says why the job failed.
    """
    root = logging.getLogger(LOGGER_NAME)
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if path is not None:
        os.makedirs(os.path.dirname(os.fspath(path)) or ".", exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w"))
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in handlers:
        handler.setFormatter(fmt)
        root.addHandler(handler)
    warnings_logger = logging.getLogger("py.warnings")
    for handler in handlers:
        warnings_logger.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)
    try:
        yield root
    except BaseException:
        root.exception("job failed")
        raise
    finally:
        logging.captureWarnings(False)
        for handler in handlers:
            root.removeHandler(handler)
            warnings_logger.removeHandler(handler)
            handler.close()
