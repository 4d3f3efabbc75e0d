"""Running Snakemake on config/smoke.yaml from the tests, following the commands its errors advise, and reading
what it planned or ran; a lock and a result made once that pytest's workers share; and the oracles several test files
share (old modules, the BAT definition over a large vocabulary)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
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


def snakemake(workdir, *args, overrides=(), check=True, timeout=1800, repo: Path = REPO, env=None, cwd=None):
    """Run Snakemake on the smoke config with 2 local cores (`workdir` relative to `cwd` where it is relative); fail
    the test with its output when it fails."""
    cmd = snakemake_command(workdir, "--cores", "2", *args, overrides=overrides, repo=repo)
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd)
    if check and result.returncode != 0:
        pytest.fail(f"snakemake {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result


@contextmanager
def held_lock(lock: Path, timeout_s: float, what: str) -> Iterator[None]:
    """Hold `lock` (an `flock` on the file, let go when its holder exits however it ends) for the block: another
    process waits here until the holder lets go; TimeoutError naming the lock and `what` it guards after `timeout_s`."""
    with open(lock, "a") as handle:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{what} held {lock} for over {timeout_s:.0f} s") from None
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def made_once(folder: Path, name: str, make: Callable[[], dict], timeout_s: float) -> dict:
    """What `make()` returns (a JSON object), made by the first process to ask for it in `folder` and read by every
    later one, which waits while the first makes it (pytest-xdist's workers share their session's temporary folder).
    A failure is recorded too: a later process fails with the first one's message instead of making it again."""
    record = folder / f"{name}.json"
    with held_lock(folder / f"{name}.lock", timeout_s, f"the process making {name}"):
        if not record.exists():
            try:
                made = make()
            except BaseException as error:  # pytest.fail raises an exception outside Exception
                record.write_text(json.dumps({"failed": f"{type(error).__name__}: {error}"}))
                raise
            record.write_text(json.dumps({"made": made}))
    made = json.loads(record.read_text())
    if "failed" in made:
        pytest.fail(f"{name} failed in the process that made it:\n{made['failed']}", pytrace=False)
    return made["made"]


def repository_copy(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the repository, and the environment whose PYTHONPATH puts its `src/` first."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(".git", ".venv", ".venv-uv", "results", "runs",
                                                              ".snakemake", "__pycache__", "build", "*.egg-info"))
    return copy, {**os.environ, "PYTHONPATH": str(copy / "src")}


ADVICE = re.compile(r"`((?:rm \S+ && )?snakemake [^`]+)`, typed in (\S+?)[;:]")


def follow_advice(text: str, env: dict[str, str], timeout: int = 1800) -> tuple[list[tuple[str, str]], str]:
    """Run the last command an error advises in `text` as a user would: in a shell, in the folder it names, with the
    venv's snakemake first on PATH. Returns the jobs it ran (rule, wildcards) and the command."""
    matches = ADVICE.findall(text)
    assert matches, f"no advised command in:\n{text[-2000:]}"
    command, folder = matches[-1]
    shell_env = {**env, "PATH": f"{SNAKEMAKE.parent}{os.pathsep}{env.get('PATH', '')}"}
    result = subprocess.run(["bash", "-c", command], cwd=folder, env=shell_env, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        pytest.fail(f"the advice `{command}` failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return planned_jobs(result.stdout + result.stderr), command


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


def rule_blocks(repo: Path = REPO):
    """(.smk file, rule name, the rule's text, its `script:` name or None) for every rule of `repo`; a rule made by
    `use rule <parent> as <name> with:` with its parent's text and script, which it inherits."""
    rules, derived = {}, []
    for smk in (repo / "rules").glob("*.smk"):
        for block in re.split(r"(?m)^(?=rule \w+:|use rule )", smk.read_text())[1:]:
            if use := re.match(r"use rule (\w+) as (\w+) with:", block):
                derived.append((smk, *use.groups()))
                continue
            script = re.search(r'script:\n\s+"\.\./workflow/scripts/(\w+)\.py"', block)
            rules[re.match(r"rule (\w+):", block).group(1)] = smk, block, script and script.group(1)
    for name, (smk, block, script) in rules.items():
        yield smk, name, block, script
    for smk, parent, name in derived:
        yield smk, name, *rules[parent][1:]


def rules_running(module: str, repo: Path = REPO) -> set[str]:
    """The rules whose script reaches `oversmooth.<module>` (their `**library_code(...)` names the script)."""
    from oversmooth.core.provenance import module_closure

    return {rule for _, rule, _, script in rule_blocks(repo)
            if f"oversmooth.{module}" in module_closure((repo / "workflow" / "scripts" / f"{script}.py").read_text())}


def jobs_an_edit_reruns(module: str, empty: Path, *configfiles: str) -> Counter[str]:
    """How many jobs of each rule an edit of `oversmooth.<module>` plans on a finished run of config/config.yaml with
    `configfiles` over it: the jobs of the rules whose scripts reach the module, and every job computed from theirs,
    `all` included, in the whole DAG (`snakemake --dag` in the `empty` folder plans every job)."""
    configs = ["--configfile", *(str(REPO / "config" / name) for name in configfiles)] if configfiles else []
    result = subprocess.run([str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "--directory", str(empty), *configs,
                             "--dag", "dot", "--", "all"], capture_output=True, text=True, timeout=300, check=True)
    labels = re.findall(r'^\s*(\d+)\[label = "([^"]*)"', result.stdout, re.M)
    rules = {job: label.split("\\n")[0] for job, label in labels}  # a label's first line: its rule
    consumers: dict[str, set[str]] = {}
    for producer, consumer in re.findall(r"^\s*(\d+) -> (\d+)", result.stdout, re.M):
        consumers.setdefault(producer, set()).add(consumer)
    running = rules_running(module)
    pending, rerun = [job for job, rule in rules.items() if rule in running], set()
    while pending:
        job = pending.pop()
        if job not in rerun:
            rerun.add(job)
            pending += consumers.get(job, ())
    return Counter(rules[job] for job in rerun)


def touched_run(folder: Path, *configfiles: str) -> None:
    """A run of config/config.yaml with `configfiles` over it in `folder`, finished without computing anything: every
    file of `all` written empty, then every job recorded by `snakemake --touch --forceall` with its params as a job
    that ran records them (a minute, where a run takes many). A dry run on it plans what a change of settings or code
    would rerun in a finished run, not what a changed file would."""
    configs = ["--configfile", *(str(REPO / "config" / name) for name in configfiles)] if configfiles else []
    command = [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "--directory", str(folder), *configs]
    summary = subprocess.run([*command, "--summary", "all"], capture_output=True, text=True, timeout=300, check=True)
    for line in summary.stdout.splitlines()[1:]:  # after the header: a file of the run, its date, rule, ..., status
        path = folder / line.split("\t", 1)[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    subprocess.run([*command, "--cores", "1", "--touch", "--forceall", "all"], capture_output=True, text=True,
                   timeout=900, check=True)


def demo_dry_run(folder: Path, *configfiles: Path) -> str:
    """The output of `snakemake -n all` on the demo config (config/config.yaml) with `configfiles` over it in
    `folder`."""
    configs = ["--configfile", *map(str, configfiles)] if configfiles else []
    command = [str(SNAKEMAKE), "-s", str(REPO / "Snakefile"), "--directory", str(folder), *configs, "-n", "all"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        pytest.fail(f"snakemake -n all failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout + result.stderr


def module_at(revision: str, path: str):
    """`path` (a module of the package) as it was at `revision`, loaded beside today's package by
    benchmarks/shared.module_at (git's history is needed): an oracle of the code before a change."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("benchmark_shared", REPO / "benchmarks" / "shared.py")
    shared = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shared)
    return shared.module_at(revision, path)


def min_q_i_by_interior_point(Q: np.ndarray, p: np.ndarray, i: int, threshold: float = 0.2) -> tuple[float, float]:
    """The definition's LP for token i (min q_i over q in [0, u] with A q = A p; Q: A's orthonormal rows) over every
    token, by the dense interior-point method: (q_i of a point it found in P, a lower bound on min q_i from its
    duals). Either settles i against zero_tol: a point of P with q_i <= zero_tol, or a bound above it."""
    from oversmooth.analysis.bat.lp import interior_point

    u = p / (1 - threshold)
    A, b, cost = Q * u, Q @ p, np.zeros(len(p))  # the columns scaled to [0, 1]: q = u x
    cost[i] = 1.0
    x, y, _ = interior_point(A, b, cost, 1e-10)
    q = u * x
    assert np.abs(Q @ q - b).max() <= 1e-9 and q.min() >= 0 and (q - u).max() <= 0  # a point of P
    return q[i], u[i] * (y @ b + np.minimum(0.0, cost - A.T @ y).sum())  # weak duality, over every token


def status_rows(lines: list[str], title: str) -> dict[str, list[str]]:
    """The rows of one table of a run's status (`oversmooth.workflow.status`), by their first word, the header's
    included: the table under the line that starts with `title`, up to the next empty line."""
    start = next(i for i, line in enumerate(lines) if line.startswith(title)) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i]), len(lines))
    return {line.split()[0]: line.split()[1:] for line in lines[start:end]}
