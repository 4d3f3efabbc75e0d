"""The commands the pipeline's errors advise: each restores what a damaged file or a failed job cost, at the least
cost, typed in the repository's folder with the run's own options.

A job knows its files by paths relative to its run's folder; the command that restores them must name that folder
(`--directory`), and the profile or cores, `--config` values and config files the run was started with, or, typed as
printed, it acts on another run. The Snakefile records them (`run_options`) in the environment its jobs inherit
(`RUN_VARIABLE`), outside the config: a value there would end up in no rule's params. The command that restores a
failed job's outputs leaves out the `--config` values (`lost_outputs_note`): the failing setting may be one of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from oversmooth.core.layout import RESULTS

RUN_VARIABLE = "OVERSMOOTH_RUN"  # {"repository": <its folder>, "options": [<the run's snakemake options>]}, as JSON


def relative_or_absolute(path: str | os.PathLike, folder: str | os.PathLike) -> str:
    """`path` relative to `folder` where it lies inside it ('.' for the folder itself), else absolute."""
    path, folder = Path(path).resolve(), Path(folder).resolve()
    return path.relative_to(folder).as_posix() if path.is_relative_to(folder) else path.as_posix()


def run_options(repository: str | os.PathLike, folder: str | os.PathLike, *,
                configfiles: Sequence[str | os.PathLike] = (), config: Mapping[str, Any] | None = None,
                profiles: Sequence[str] = (), cores: int | None = None) -> list[str]:
    """The options that repeat a run from the repository's folder: its folder (`--directory`, relative to the
    repository where it lies inside it), its profiles (else its cores), its `--config` values and its config files
    (last: `--configfile` takes every word up to the next option)."""
    options = []
    directory = relative_or_absolute(folder, repository)
    if directory != ".":
        options += ["--directory", directory]
    for profile in profiles:
        options += ["--profile", profile]
    if not profiles and cores is not None:
        options += ["--cores", str(cores)]
    if config:
        options += ["--config", *(f"{key}={json.dumps(value)}" for key, value in config.items())]
    if configfiles:
        options += ["--configfile", *(relative_or_absolute(path, repository) for path in configfiles)]
    return options


def command_line_profiles(argv: Sequence[str]) -> list[str]:
    """The `--profile` values of a snakemake command line (`--profile x` or `--profile=x`)."""
    profiles = []
    for word, following in zip(argv, [*argv[1:], None]):
        if word == "--profile" and following is not None:
            profiles.append(following)
        elif word.startswith("--profile="):
            profiles.append(word.split("=", 1)[1])
    return profiles


def run_record(repository: str | os.PathLike, options: Sequence[str]) -> str:
    """The value of `RUN_VARIABLE`: where to type a command, and the run's options."""
    return json.dumps({"repository": os.fspath(Path(repository).resolve()), "options": list(options)})


def _run() -> dict:
    """The run this process's job belongs to (`RUN_VARIABLE`); no repository and no options outside Snakemake."""
    return {"repository": None, "options": [], **json.loads(os.environ.get(RUN_VARIABLE) or "{}")}


def snakemake_command(*words: str, config_values: bool = True) -> str:
    """`snakemake <words>` with the run's own options, quoted for a shell; without its `--config` values where
    `config_values` is false."""
    options = _run()["options"]
    return shlex.join(["snakemake", *words, *(options if config_values else split_config_values(options)[0])])


def split_config_values(options: Sequence[str]) -> tuple[list[str], list[str]]:
    """(Snakemake `options` without `--config` and the `key=value` words that follow it, those words)."""
    kept, values, in_config = [], [], False
    for word in options:
        in_config = word == "--config" or (in_config and not word.startswith("-"))
        if not in_config:
            kept.append(word)
        elif word != "--config":
            values.append(word)
    return kept, values


def typed_in() -> str:
    """Where to type a command this module gives: the repository's folder, when known."""
    repository = _run()["repository"]
    return f", typed in {repository}" if repository else " (with the run's own --directory, config files and profile)"


def is_result(path: str | os.PathLike) -> bool:
    """Whether `path` lies in the run's `results/` (the pipeline wrote it) rather than being a source file."""
    return Path(path).resolve().is_relative_to(Path(RESULTS).resolve())


def restore_advice(path: str | os.PathLike, output: str | os.PathLike | None = None) -> str:
    """How to restore a damaged file. A result is rebuilt alone by the job that wrote it (`--forcerun` on its
    `output`, by default the file itself, as the target): deleting it is not enough, since Snakemake does not rebuild a
    missing file while what was computed from it is up to date, and `all --forcerun` reruns everything computed from
    it as well. Then the run's own command reruns the job that failed, and what was computed from the file only where
    its bytes changed (inputs are compared by content). A source file is replaced."""
    if not is_result(path):
        return "It may be truncated or corrupt: replace it (a source file: no job writes it)"
    shown = relative_or_absolute(output or path, ".")
    return (f"It may be truncated or corrupt: rebuild it alone with `{snakemake_command(shown, '--forcerun', shown)}`"
            f"{typed_in()}; then run the run's own command again: the job that failed reruns, and what was computed "
            "from the file only where its bytes changed")


def delete_and_rerun_advice(path: str | os.PathLike, output: str | os.PathLike) -> str:
    """How to go on without a damaged file that a job reads but no rule writes (a training's resume state): delete it
    (its path as seen from where the command is typed), then rebuild the job's `output` alone."""
    delete = shlex.join(["rm", relative_or_absolute(path, _run()["repository"] or ".")])
    rerun = snakemake_command(relative_or_absolute(output, "."))
    return f"Delete it and rerun its job alone: `{delete} && {rerun}`{typed_in()}"


def lost_outputs_note(outputs: Sequence[str | os.PathLike], cause: str | None = None) -> str:
    """What a failed job cost, its `cause` (the error), and the command that restores the run once the cause is
    fixed: Snakemake deletes a job's outputs before it runs, so a job that fails leaves none, and what was computed
    from them would rerun in full (Snakemake cannot know that their next version holds the same bytes) unless they
    are rebuilt alone first.

    The command is the run's own but for its `--config` values: a setting typed on the command line is where one is
    tried, and it cannot be fixed in a printed command (repeated, it would fail again the same way); without
    them the job builds what the run's config files say."""
    shown = [relative_or_absolute(path, ".") for path in outputs]
    typed = split_config_values(_run()["options"])[1]
    left_out = (f" The command leaves out this run's `--config` values ({shlex.join(typed)}), where a failing setting "
                "may lie: it builds what the run's config files say; to keep a value, put it (fixed) in a config "
                "file after the run's own." if typed else "")
    named = f" Its cause: {cause.rstrip('.')}." if cause else ""
    return (f"Snakemake deleted this job's outputs before it ran ({', '.join(shown)}).{named} "
            f"Once the cause is fixed, rebuild them alone with `{snakemake_command(shown[0], config_values=False)}`"
            f"{typed_in()}: then what was computed from them reruns only where their bytes changed.{left_out}")


def error_summary(error: BaseException, limit: int = 300) -> str:
    """An error as one line: its type and its message's first line, cut at `limit` characters."""
    lines = str(error).splitlines()
    text = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def noting_lost_outputs(outputs: Sequence[str | os.PathLike]) -> Iterator[None]:
    """Add `lost_outputs_note` to an error that ends the block (the job's failure, named as its cause; a stop is no
    error)."""
    try:
        yield
    except Exception as error:
        error.add_note(lost_outputs_note(outputs, error_summary(error)))
        raise
