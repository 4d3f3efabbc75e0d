"""A run folder knows the config files it was made with, and refuses a command that names others.

Forgetting `--configfile config/thesis.yaml` in `runs/thesis` would run the demo's config there: Snakemake sees
"Params have changed" and replaces the run's corpus and models with the demo's, GPU-days of training. The first
command that runs jobs in a folder records its config files in `results/run_config.yaml`; every later command in
that folder must name the same files first (more may follow: an overlay of a few settings, such as a cluster's
partitions). A command that does not is refused before any job, naming both lists and the override
`--config replace_run_config=true`, which replaces the record on purpose. Settings edited inside the recorded files,
and `--config` values, are changes made on purpose and pass: only the stale stages rerun.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from oversmooth.core.io import atomic_path
from oversmooth.core.layout import RESULTS
from oversmooth.core.recovery import relative_or_absolute

RUN_CONFIG = f"{RESULTS}/run_config.yaml"  # in the run's folder
DEFAULT_CONFIG = "config/config.yaml"  # the Snakefile's own configfile, under every other
REPLACE_KEY = "replace_run_config"  # `--config replace_run_config=true`: record this command's config files


class RunConfigError(ValueError):
    """A command names other config files than those its run folder was made with."""


def config_files(repository: str | os.PathLike, given: Sequence[str | os.PathLike]) -> list[str]:
    """The config files a command runs on, the default config first, each relative to the repository where it lies
    inside it (else absolute), so that the same file named from another folder is the same entry."""
    files = [relative_or_absolute(path, repository) for path in given]
    return [DEFAULT_CONFIG, *(f for f in files if f != DEFAULT_CONFIG)]


def recorded_config_files(folder: str | os.PathLike) -> list[str] | None:
    """The config files a run folder was made with, None where it has no record (a new folder)."""
    path = Path(folder) / RUN_CONFIG
    if not path.exists():
        return None
    record = yaml.safe_load(path.read_text()) or {}
    files = record.get("config_files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise RunConfigError(f"{path}: no list of config files under config_files; delete it to record the next "
                             "command's")
    return files


def replace_requested(overrides: Mapping[str, Any]) -> bool:
    """Whether the command's `--config` values ask to replace the run folder's record."""
    return str(overrides.get(REPLACE_KEY, "")).lower() in ("true", "1", "yes")


def shown(files: Sequence[str]) -> str:
    """Config files as a command names them (the default config, always first, left out)."""
    return " ".join(files[1:]) or "(none: config/config.yaml alone)"


def check_run_config(folder: str | os.PathLike, files: Sequence[str], replace: bool = False) -> None:
    """Refuse a command in `folder` whose config files (`config_files`) do not start with those its run was made
    with, unless `replace`: the error names both lists, the command that continues the run and the override."""
    recorded = recorded_config_files(folder)
    if recorded is None or replace or list(files[:len(recorded)]) == recorded:
        return
    raise RunConfigError(
        f"{Path(folder).resolve()} was made with the config files {shown(recorded)} ({RUN_CONFIG}); this command "
        f"names {shown(files)}. Its jobs would replace that run's results with another config's. Name the "
        f"run's files first: --configfile {' '.join(recorded[1:]) or DEFAULT_CONFIG} [more files]; or, to replace "
        f"that run's config on purpose, add --config {REPLACE_KEY}=true")


def record_run_config(folder: str | os.PathLike, files: Sequence[str], replace: bool = False) -> bool:
    """Record the config files of a command that runs jobs in `folder`, where none is recorded (or `replace`);
    True where it wrote the record."""
    if recorded_config_files(folder) is not None and not replace:
        return False
    path = Path(folder) / RUN_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    text = ("# The config files this run folder was made with (oversmooth.workflow.runconfig): every command in this\n"
            "# folder names them first. Replace them on purpose with --config replace_run_config=true.\n")
    with atomic_path(path) as tmp:
        tmp.write_text(text + yaml.safe_dump({"config_files": list(files)}, sort_keys=False))
    return True
