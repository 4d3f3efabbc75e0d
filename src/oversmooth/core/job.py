"""The end of a workflow script's job. Apart from `oversmooth.core.logs`, which the training's own processes use too,
so that a change here never reruns a training."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

from oversmooth.core.logs import log_to_file


@contextlib.contextmanager
def workflow_job(path: str | os.PathLike | None) -> Iterator[logging.Logger]:
    """The whole of a workflow script's job: `log_to_file`, then, once the block has succeeded, the end of the
    process without Python's shutdown (`os._exit(0)`, after flushing the logs and standard streams).

    That shutdown (module teardown, the final garbage collections) costs a job that imported torch about 0.45
    CPU-s and does nothing for it: by then the job's outputs are closed and in place and its log is closed
    (docs/performance.md). A failure or a stop leaves the block by its exception and the process shuts down as
    usual, with its traceback and exit status.
    """
    with log_to_file(path) as logger:
        yield logger
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
