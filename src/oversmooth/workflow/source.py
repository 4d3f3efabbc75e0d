"""The workflow's own folder (its Snakefile, config/, rules/, workflow/scripts/), which the package does not hold:
`pip install .` installs the library, the schema and nothing else, and a run reads the rest from a clone. The
commands that read the workflow's files (config check, plan, run profile) find it here; the Snakefile names it to a
rule environment's post-deploy script through SOURCE_VARIABLE (envs/oversmooth.post-deploy.sh)."""

from __future__ import annotations

import os
from pathlib import Path

# Set by the Snakefile to its own folder, for envs/oversmooth.post-deploy.sh (the same name as envs/lock.py's)
SOURCE_VARIABLE = "OVERSMOOTH_SOURCE"
WORKFLOW_FILES = ("Snakefile", "config/config.yaml")


def is_workflow_folder(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds the workflow: its Snakefile and its base config."""
    return all((Path(folder) / name).is_file() for name in WORKFLOW_FILES)


def workflow_folder(given: str | os.PathLike | None = None) -> Path:
    """The workflow's folder: `given` (a `--workflow` option); else the checkout this package is installed from in
    development mode (`pip install -e`, `make install`); else the current folder or the nearest folder above it
    that holds the workflow (a clone whose package `pip install .` installed)."""
    if given is not None:
        if not is_workflow_folder(given):
            raise FileNotFoundError(f"--workflow {given}: no workflow there (no {' and no '.join(WORKFLOW_FILES)})")
        return Path(given).resolve()
    here = Path.cwd().resolve()
    for folder in (Path(__file__).resolve().parents[3], here, *here.parents):
        if is_workflow_folder(folder):
            return folder
    raise FileNotFoundError(f"no workflow folder in {here} or above it (a folder with {' and '.join(WORKFLOW_FILES)}):"
                            " run from a clone of the repository, or name it with --workflow")
