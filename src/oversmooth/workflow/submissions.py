"""How a config's jobs reach a SLURM cluster under the project's profile (profiles/slurm): the jobs that run where
snakemake runs, those that share a submission (job groups, `oversmooth.workflow.groups.job_group`, on where the
profile's `group-components` names them), what the groups save (queue waits and Snakemake start-ups on the nodes),
and the check that no GPU job's submission waits for a CPU job that the GPU job does not itself wait for.

    python -m oversmooth.workflow.submissions --local-rules --configfile config/thesis.yaml   (what `make plan` runs)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

import pandas as pd

from oversmooth.workflow.source import workflow_folder

PROFILE = Path("profiles") / "slurm"  # in the workflow's folder


class DryRunJob(Protocol):
    """A job as `oversmooth.workflow.plan.parse_dry_run` reads it."""

    rule: str
    inputs: list[str]
    outputs: list[str]
    gpus: int
    group: int | None


def local_rules(configfiles: Sequence[str | Path], workflow: Path) -> frozenset[str]:
    """The rules whose jobs run where snakemake runs (`localrules`, `localrule:`), as the workflow in folder
    `workflow` declares them under these config files (a dry run does not say which jobs are local)."""
    command = [sys.executable, "-m", "oversmooth.workflow.submissions", "--local-rules", "--workflow", str(workflow),
               "--configfile", *(str(Path(f).resolve()) for f in configfiles)]
    with tempfile.TemporaryDirectory(prefix="oversmooth-local-rules-") as folder:
        out = subprocess.run(command, capture_output=True, text=True, cwd=folder, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"reading the local rules under {list(configfiles)} failed:\n{out.stderr[-3000:]}")
    return frozenset(json.loads(out.stdout.strip().splitlines()[-1]))


def _print_local_rules(configfiles: Sequence[str], workflow: Path) -> None:
    """Load the workflow with Snakemake's API (in the working directory, which a caller makes empty) and print its
    local rules as a JSON list: Snakemake keeps them in its workflow's `_localrules` (Snakemake pinned)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet=None)) as api:
        workflow_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                                    config_settings=ConfigSettings(configfiles=[Path(f) for f in configfiles]),
                                    snakefile=workflow / "Snakefile", workdir=Path.cwd())
        print(json.dumps(sorted(workflow_api._workflow._localrules)))


@dataclass(frozen=True)
class Submissions:
    """A DAG's jobs by where they run: `local` on the submit host, the rest submitted `alone` or in `groups`."""

    jobs: int
    local: int
    alone: int
    groups: int

    @property
    def cluster_jobs(self) -> int:
        """Jobs that run on the cluster: what is submitted without groups."""
        return self.jobs - self.local

    @property
    def submitted(self) -> int:
        return self.alone + self.groups

    def snakemake_startups(self, grouped: bool) -> int:
        """Snakemake start-ups on the nodes: a submission's job step starts one, and one more for each of its jobs
        (the SLURM plugin runs each job of a submission through `srun` in a Snakemake of its own)."""
        return (self.submitted if grouped else self.cluster_jobs) + self.cluster_jobs


def submission_table(submissions: Submissions, snakemake_startup_s: float) -> pd.DataFrame:
    """The cluster jobs submitted one by one and in the profile's groups: submissions (a queue wait each), Snakemake
    start-ups on the nodes and their hours at `snakemake_startup_s` each."""
    modes = (("one by one", False), ("in groups", True))
    rows = [(label, submissions.submitted if grouped else submissions.cluster_jobs,
             submissions.snakemake_startups(grouped)) for label, grouped in modes]
    table = pd.DataFrame(rows, columns=["submitted", "submissions", "snakemake_startups"])
    table["startup_h"] = table["snakemake_startups"] * snakemake_startup_s / 3600
    return table


def count_submissions(jobs: Sequence[DryRunJob], local: frozenset[str]) -> Submissions:
    """What a dry run under the profile submits: its groups, and its jobs that are in none and not local."""
    return Submissions(jobs=len(jobs), local=sum(job.rule in local for job in jobs),
                       alone=sum(job.group is None and job.rule not in local for job in jobs),
                       groups=len({job.group for job in jobs if job.group is not None}))


def mixed_groups(jobs: Sequence[DryRunJob]) -> list[list[str]]:
    """The rules of each group that holds both GPU and CPU jobs (none should)."""
    members: dict[int, list[DryRunJob]] = defaultdict(list)
    for job in jobs:
        if job.group is not None:
            members[job.group].append(job)
    return [sorted({job.rule for job in group}) for group in members.values()
            if len({job.gpus > 0 for job in group}) > 1]


def gpu_waits_behind_cpu(jobs: Sequence[DryRunJob]) -> list[str]:
    """GPU jobs whose submission waits for a CPU submission that waits for more than the GPU job does.

    A submission starts when all its jobs' inputs from outside it exist. A GPU job is held back by a CPU job when
    its own submission (its group, or itself) reads from a CPU submission (a group, or one job) whose inputs from
    outside are not all made by jobs the GPU job waits for anyway: such a CPU submission could start later than the
    GPU job's own inputs allow. Each such case as `<GPU job's rule> -> [<the CPU submission's rules>]`."""
    producer = {path: index for index, job in enumerate(jobs) for path in job.outputs}
    depends = [{producer[path] for path in job.inputs if path in producer} for job in jobs]

    @cache
    def ancestors(index: int) -> frozenset[int]:
        return frozenset(depends[index]).union(*(ancestors(d) for d in depends[index]))

    def unit(index: int) -> tuple[str, int]:
        group = jobs[index].group
        return ("group", group) if group is not None else ("job", index)

    members: dict[tuple[str, int], set[int]] = defaultdict(set)
    for index in range(len(jobs)):
        members[unit(index)].add(index)
    found = []
    for index, job in enumerate(jobs):
        if not job.gpus:
            continue
        own = members[unit(index)]
        for waited in {unit(d) for member in own for d in depends[member]} - {unit(index)}:
            cpu = members[waited]
            if any(jobs[member].gpus for member in cpu):
                continue
            outside = {d for member in cpu for d in depends[member]} - cpu
            if outside - ancestors(index):
                found.append(f"{job.rule} -> {sorted({jobs[member].rule for member in cpu})}")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--local-rules", action="store_true", required=True,
                        help="print the workflow's local rules (JSON) under these config files")
    parser.add_argument("--configfile", nargs="*", default=[], help="config files over config/config.yaml")
    parser.add_argument("--workflow", help="the workflow's folder (default: this package's checkout, or the current "
                        "folder's)")
    args = parser.parse_args(argv)
    workflow = workflow_folder(args.workflow)
    _print_local_rules(args.configfile or [str(workflow / "config" / "config.yaml")], workflow)
    return 0


if __name__ == "__main__":
    sys.exit(main())
