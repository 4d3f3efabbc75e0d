"""The library's layers (pyproject.toml's import-linter contracts; docs/architecture.md) hold: no module imports
from a later stage's sub-package, and no two modules or sub-packages import each other in a cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(repo: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(repo / "pyproject.toml")],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_the_library_keeps_its_layers_and_has_no_import_cycle(repo):
    result = lint_imports(repo, repo / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


@pytest.mark.parametrize("module, statement, broken, summary", [
    # the shared layer reaching up into the reporting one: a layer breach, and a cycle of sub-packages
    ("core/catalog.py", "from oversmooth.reporting import metrics_report",
     "oversmooth.core.catalog -> oversmooth.reporting.metrics_report", "Contracts: 0 kept, 2 broken."),
    # two modules of one sub-package importing each other (io <- plotting already): a cycle, not a layer breach
    ("core/io.py", "from oversmooth.core import plotting", "no import cycles between modules BROKEN",
     "Contracts: 1 kept, 1 broken."),
])
def test_an_import_from_a_later_stage_or_a_cycle_breaks_a_contract(repo, tmp_path, module, statement, broken, summary):
    src = tmp_path / "src"
    shutil.copytree(repo / "src" / "oversmooth", src / "oversmooth")
    path = src / "oversmooth" / module
    path.write_text(path.read_text() + f"\n\ndef _late():\n    {statement}  # noqa\n")
    result = lint_imports(repo, src)
    assert result.returncode == 1 and summary in result.stdout, result.stdout
    assert broken in result.stdout
