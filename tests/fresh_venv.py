"""Fresh virtual environments for the install tests, made without the network: a new venv that sees the packages of
the venv running the tests after its own (a .pth line naming that venv's site-packages, whose own .pth files, the
editable oversmooth's among them, are not read), so that pip finds every pinned package installed and downloads
nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

TESTS_SITE = Path(sysconfig.get_paths()["purelib"])  # the site-packages of the venv that runs the tests


def fresh_venv(path: Path) -> Path:
    """A new venv at `path` (without pip of its own: the tests' venv's pip serves it) that sees the tests' venv's
    packages after its own; its Python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_tests_site.pth").write_text(f"{TESTS_SITE}\n")  # read last: the venv's own packages come first
    return python


def offline_environment(**variables: str) -> dict[str, str]:
    """The environment for pip in a fresh venv: no index (every pinned package is found installed)."""
    return {**os.environ, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", **variables}


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> str:
    """Run `command`; its output, or a failure that shows it."""
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    shown = f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    assert result.returncode == 0, f"{' '.join(command)} failed in {cwd}:\n{shown}"
    return result.stdout + result.stderr
