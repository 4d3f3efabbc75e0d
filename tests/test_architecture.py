"""The library's layers (pyproject.toml's import-linter contracts; docs/architecture.md) hold: no module imports
from a later stage's layer, and no two modules import each other in a cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(repo: Path, src: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(repo / "pyproject.toml")],
                          capture_output=True, text=True, timeout=300, env=env, check=False)


def test_the_library_keeps_its_layers_and_has_no_import_cycle(repo):
    result = lint_imports(repo, repo / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 2 kept, 0 broken." in result.stdout


def test_an_import_from_a_later_stage_or_a_cycle_breaks_a_contract(repo, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(repo / "src" / "oversmooth", src / "oversmooth")
    catalog = src / "oversmooth" / "catalog.py"  # the shared layer reaching up into the reporting one
    catalog.write_text(catalog.read_text() + "\n\ndef _late():\n    from oversmooth import metrics_report  # noqa\n")
    result = lint_imports(repo, src)
    assert result.returncode == 1 and "BROKEN" in result.stdout
    assert "oversmooth.catalog -> oversmooth.metrics_report" in result.stdout
