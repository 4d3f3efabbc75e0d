"""Running Snakemake on config/smoke.yaml from the tests, and reading what it planned."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oversmooth.workflow.config import load_config

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def repo_config(name: str, repo: Path = REPO) -> dict:
    """A config of the repository as Snakemake reads it: config/config.yaml, with config/<name> over it."""
    overlays = [] if name == "config.yaml" else [repo / "config" / name]
    return load_config(repo / "config" / "config.yaml", *overlays)


def snakemake_command(workdir: Path, *args: str, overrides=(), repo: Path = REPO) -> list[str]:
    """The command line of a Snakemake run of `repo`'s workflow on the smoke config (plus override config files)
    in `workdir`."""
    configs = [str(repo / "config" / "smoke.yaml"), *map(str, overrides)]
    return [str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "--directory", str(workdir), "--configfile", *configs,
            *args]


def snakemake(workdir, *args, overrides=(), check=True, timeout=1800, repo: Path = REPO, env=None):
    """Run Snakemake on the smoke config with 2 local cores; fail the test with its output when it fails."""
    cmd = snakemake_command(workdir, "--cores", "2", *args, overrides=overrides, repo=repo)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if check and result.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def planned_rules(output: str) -> set[str]:
    """Rule names in a `snakemake -n` job table."""
    rules, in_table = set(), False
    for line in output.splitlines():
        if line.startswith("job ") and "count" in line:
            in_table = True
            continue
        if in_table:
            parts = line.split()
            if not parts or line.startswith("total"):
                break
            if not line.startswith("-"):
                rules.add(parts[0])
    return rules


def planned_jobs(output: str) -> list[tuple[str, str]]:
    """(rule, wildcards) of every job a `snakemake -n` run lists (wildcards "" for a job without any)."""
    jobs = []
    for line in output.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("rule", "localrule") and words[1].endswith(":"):
            jobs.append([words[1][:-1], ""])
        elif jobs and line.strip().startswith("wildcards:"):
            jobs[-1][1] = line.split("wildcards:", 1)[1].strip()
    return [tuple(job) for job in jobs]


def report_rules() -> set[str]:
    """The tables and figures: the `localrules:` of rules/report.smk."""
    lines = (REPO / "rules" / "report.smk").read_text().split("localrules:", 1)[1].split("\n\n", 1)[0]
    return {name.strip().rstrip(",") for name in lines.split() if name.strip().rstrip(",")}
