"""Every command the README and docs/ show must work as written: each Snakemake command as a dry run (`-n`) in a
fresh copy of the repository, each `make` target as `make -n`, shell set-up lines (printf) for real."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from workflow_helpers import repository_copy

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = ["README.md", *(f"docs/{p.name}" for p in sorted((REPO / "docs").glob("*.md"))), "profiles/slurm/README.md"]
BIN = Path(sys.executable).parent


def shown_commands(text: str) -> list[str]:
    """The command lines of a Markdown text's ```bash blocks, comments stripped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip()
            if command and not command.startswith("#"):
                commands.append(command)
    return commands


def dry_run_form(command: str) -> str | None:
    """The command as the test runs it; None for one that needs a finished run (the report: tested on the smoke
    run by test_workflow) or a package install."""
    words = shlex.split(command)
    if words[0] == "snakemake":
        return None if "--report" in words else f"{command} -n"
    if words[0] == "make":
        return shlex.join(["make", "-n", *words[1:]])  # quoted as written: `CONFIG="a.yaml b.yaml"` is one word
    if words[0] in ("printf", "source"):
        return command
    if words[:2] == ["pip", "install"]:
        return None
    raise AssertionError(f"a documented command the test does not know how to check: {command}")


def test_the_docs_show_the_commands_users_run():
    commands = [c for doc in DOCUMENTS for c in shown_commands((REPO / doc).read_text())]
    assert "snakemake all --profile profiles/slurm --directory runs/thesis" in commands
    assert any("--configfile config/thesis.yaml config/cluster.yaml" in c for c in commands)
    assert any(c.startswith("snakemake all") and "--config 'metrics=" in c for c in commands)


def shell_in_a_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A fresh copy of the repository, and a shell environment with the venv's commands first on PATH."""
    copy, env = repository_copy(tmp_path)
    return copy, {**env, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def run_dry(runnable: str, copy: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A command's dry-run form (`dry_run_form`), in a shell in the copy."""
    return subprocess.run(["bash", "-c", runnable], cwd=copy, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.workflow
@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_documented_command_works_as_written(document, tmp_path):
    copy, env = shell_in_a_copy(tmp_path)
    checked = 0
    for command in shown_commands((REPO / document).read_text()):
        runnable = dry_run_form(command)
        if runnable is None:
            continue
        result = run_dry(runnable, copy, env)
        assert result.returncode == 0, f"{document}: `{command}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        checked += 1
    assert checked or document not in ("README.md", "docs/cluster.md")


# Where a command is shown outside a ```bash block: the docs' prose, the comments of the config files, profiles and
# Snakefile
SHOWN_INLINE = [*DOCUMENTS, "Snakefile", *(f"config/{p.name}" for p in sorted((REPO / "config").glob("*.yaml"))),
                *(str(p.relative_to(REPO)) for p in sorted((REPO / "profiles").glob("*/config.yaml")))]
NEEDS_A_FINISHED_RUN = ("--report", "--lint", "--unlock")  # the report and lint are checked by test_workflow


def inline_commands(text: str) -> list[str]:
    """The commands a text shows outside its ```bash blocks: each `snakemake ...` or `make ...` in backticks, and each
    comment line that is a command (`#   snakemake all ...`; a description after two spaces is cut off). Those with
    a placeholder (`<file>`, `...`, `$d`) or that need a finished run are left out."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found = re.findall(r"`((?:snakemake|make) [^`]+)`", text)
    found += [line.split("  ")[0].strip() for line in re.findall(r"(?m)^#\s+((?:snakemake|make) .+)$", text)]
    return [command for command in found if not re.search(r"[<>…$]|\.\.\.", command)
            and not any(word in command.split() for word in NEEDS_A_FINISHED_RUN)]


def test_the_commands_shown_inline_are_found():
    commands = {c for path in SHOWN_INLINE for c in inline_commands((REPO / path).read_text())}
    assert "snakemake all --profile profiles/slurm --directory runs/thesis --configfile config/thesis.yaml" in commands
    assert "snakemake all --profile profiles/slurm --directory runs/pilot --configfile config/pilot.yaml" in commands
    assert "make plan CONFIG=config/pilot.yaml" in commands and "snakemake --cores all all" in commands


@pytest.mark.workflow
def test_every_command_shown_inline_works_as_written(tmp_path):
    """The commands of the config files' headers (config/thesis.yaml's read its target `all` as a config file;
    config/pilot.yaml's named no --directory, and wrote into the demo's `results/`), the Snakefile's, the profiles'
    and the docs' prose, each once, as a dry run in a fresh copy of the repository."""
    copy, env = shell_in_a_copy(tmp_path)
    commands = sorted({c for path in SHOWN_INLINE for c in inline_commands((REPO / path).read_text())})
    for command in commands:
        result = run_dry(dry_run_form(command), copy, env)
        assert result.returncode == 0, f"`{command}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        assert not (copy / "results").exists(), f"`{command}` wrote into the demo's results/"


def test_the_readme_is_short_enough_to_read(repo):
    lines = (repo / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    assert [n for n, line in enumerate(lines, 1) if len(line) > 120] == []
