"""Where a finished run's time went: per stage, the jobs, their wall and CPU time, what they paid at start-up
(Python, Snakemake's preamble, imports) and in the kernel, and the run's critical path.

Reads Snakemake's own log of the run (`.snakemake/log/*.snakemake.log`: each job's rule, inputs, outputs, log
file, start and finish) and each job's log file, where `logs.log_to_file` writes the job's start-up and its CPU
time. A job log without those lines (an older run) gets its start-up from the first line it wrote, to the second.

    python -m oversmooth.workflow.runprofile [--workdir DIR] [--log FILE]      (make profile)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd

from oversmooth.workflow.source import workflow_folder

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
JOB_HEAD = re.compile(r"^(?:local)?rule (\w+):$")
FINISHED = re.compile(r"^Finished jobid: (\d+)")
FAILED = re.compile(r"^Error in rule \w+:$")
LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
START_UP = re.compile(r"start-up: ([\d.]+) s wall, ([\d.]+) CPU-s")
ENDED = re.compile(r"job ended: ([\d.]+) s wall, ([\d.]+) CPU-s user, ([\d.]+) CPU-s sys")
ATTEMPT = "==== attempt started"


@dataclass
class Job:
    """One job of a run, as Snakemake's log describes it."""

    jobid: int
    rule: str
    start: datetime
    end: datetime | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    log: str | None = None
    benchmark: str | None = None
    wildcards: str = ""
    resources: dict[str, str] = field(default_factory=dict)  # what the job asked for: mem_mb, runtime (min), ...
    failed: bool = False  # its last attempt failed (a restart is a new entry of the same jobid)

    @property
    def wall(self) -> float:
        return (self.end - self.start).total_seconds() if self.end else float("nan")


@dataclass(frozen=True)
class JobCost:
    """What a job's own log says it cost (NaN where it does not say)."""

    start_up_wall: float
    start_up_cpu: float = float("nan")
    user: float = float("nan")
    sys: float = float("nan")


def _stamp(text: str) -> datetime:
    return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y")


def _paths(value: str) -> list[str]:
    return [p.strip() for p in value.split(", ") if p.strip()]


def _resources(value: str) -> dict[str, str]:
    """`tmpdir=/tmp, mem_mb=4000, runtime=60` as a dict of strings."""
    return dict(item.split("=", 1) for item in value.split(", ") if "=" in item)


GROUP_INDENT = 4  # a group's jobs, under its `Group job` line; its error lists them deeper, by rule and jobid only


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def parse_snakemake_log(lines: Iterable[str]) -> dict[int, Job]:
    """The jobs of a Snakemake run log, by jobid, with their start, (if finished) end times and whether their last
    attempt failed (a cluster group's jobs, listed indented under its `Group job` line, start when the group does;
    a failed group lists each of its jobs' errors, indented)."""
    jobs: dict[int, Job] = {}
    stamp, current, failing = None, None, False
    for raw in lines:
        line = raw.rstrip("\n")
        if match := STAMP.match(line.strip()):
            stamp, current, failing = _stamp(match.group(1)), None, False
        elif (match := JOB_HEAD.match(line.strip())) and stamp is not None and _indent(line) <= GROUP_INDENT:
            current = Job(jobid=-1, rule=match.group(1), start=stamp)
        elif FAILED.match(line.strip()):
            failing = True
        elif failing and line.strip().startswith("jobid: "):
            if (failed := jobs.get(int(line.split(": ", 1)[1]))) is not None:
                failed.failed = True
            failing = False
        elif current is not None and line.startswith("    ") and ": " in line:
            key, value = line.strip().split(": ", 1)
            if key == "jobid":
                current.jobid = int(value)
                jobs[current.jobid] = current
            elif key == "input":
                current.inputs = _paths(value)
            elif key == "output":
                current.outputs = _paths(value)
            elif key == "log":
                current.log = _paths(value)[0]
            elif key == "benchmark":
                current.benchmark = value.strip()
            elif key == "wildcards":
                current.wildcards = value
            elif key == "resources":
                current.resources = _resources(value)
        elif (match := FINISHED.match(line)) and stamp is not None and int(match.group(1)) in jobs:
            jobs[int(match.group(1))].end = stamp
    return jobs


def job_cost(log_lines: Sequence[str], job_start: datetime) -> JobCost:
    """A job's start-up and CPU time from its log file: its last attempt's `start-up` and `job ended` lines, else
    the start-up as the time from the job's start to the first line its last attempt wrote."""
    attempts = [i for i, line in enumerate(log_lines) if ATTEMPT in line]
    last = log_lines[attempts[-1]:] if attempts else log_lines
    start_up = next((START_UP.search(line) for line in last if START_UP.search(line)), None)
    ended = next((ENDED.search(line) for line in reversed(last) if ENDED.search(line)), None)
    user, sys_ = (float(ended.group(2)), float(ended.group(3))) if ended else (float("nan"), float("nan"))
    if start_up:
        return JobCost(float(start_up.group(1)), float(start_up.group(2)), user, sys_)
    first = next((LOG_TIME.match(line) for line in last if LOG_TIME.match(line)), None)
    if first is None:
        return JobCost(float("nan"), user=user, sys=sys_)
    written = datetime.strptime(first.group(1), "%Y-%m-%d %H:%M:%S,%f")
    gap = (written - job_start).total_seconds()
    # a line older than the job (-1 s: the run log's stamps are whole seconds) is an earlier run's
    return JobCost(max(0.0, gap) if gap > -1 else float("nan"), user=user, sys=sys_)


def critical_path(jobs: Mapping[int, Job]) -> list[Job]:
    """The chain of jobs that set the run's length: from the job that finished last, back through the input each
    job waited for longest (the producer that finished last), to a job that waited for none."""
    finished = [job for job in jobs.values() if job.end is not None and job.rule != "all"]
    if not finished:
        return []
    producer = {out: job for job in finished for out in job.outputs}
    chain = [max(finished, key=lambda job: (job.end, job.jobid))]
    while True:
        before = [producer[path] for path in chain[-1].inputs if path in producer]
        if not before:
            return chain[::-1]
        chain.append(max(before, key=lambda job: (job.end, job.jobid)))


def stage_of_rules(rules_dir: str | Path) -> dict[str, str]:
    """rule -> its stage, the `.smk` file that defines it (`use rule ... as x` counts)."""
    stages = {}
    for smk in sorted(Path(rules_dir).glob("*.smk")):
        for match in re.finditer(r"^(?:rule (\w+):|use rule \w+ as (\w+))", smk.read_text(), re.M):
            stages[match.group(1) or match.group(2)] = smk.stem
    return stages


def job_frame(jobs: Mapping[int, Job], workdir: Path, stages: Mapping[str, str]) -> pd.DataFrame:
    """One row per finished job: rule, stage, wall, start-up, CPU (from the job's log, else its benchmark's
    `cpu_time`, which does not split user and system time)."""
    rows = []
    for job in jobs.values():
        if job.end is None or job.rule == "all":
            continue
        log = workdir / job.log if job.log else None
        lines = log.read_text(errors="replace").splitlines() if log and log.is_file() else []
        cost = job_cost(lines, job.start)
        rows.append({"jobid": job.jobid, "rule": job.rule, "stage": stages.get(job.rule, "?"),
                     "wildcards": job.wildcards, "wall_s": job.wall, "cpu_s": cost.user + cost.sys,
                     "start_up_s": cost.start_up_wall, "start_up_cpu_s": cost.start_up_cpu, "user_s": cost.user,
                     "sys_s": cost.sys})
        if job.benchmark and pd.isna(rows[-1]["cpu_s"]) and (workdir / job.benchmark).is_file():
            cpu = pd.to_numeric(pd.read_csv(workdir / job.benchmark, sep="\t")["cpu_time"], errors="coerce")
            rows[-1]["cpu_s"] = float(cpu.iloc[-1])
    return pd.DataFrame(rows)


def stage_table(frame: pd.DataFrame, by: str = "stage") -> pd.DataFrame:
    """Per stage (or rule): jobs, wall, CPU, start-up and its share of the wall, the kernel's share of the CPU."""
    sums = ["wall_s", "cpu_s", "user_s", "sys_s", "start_up_s", "start_up_cpu_s"]
    table = frame.groupby(by)[sums].sum(min_count=1)  # NaN where no job of the group says
    table.insert(0, "jobs", frame.groupby(by).size())
    table.loc["total"] = table.sum(min_count=1)
    table["start_up_per_job_s"] = table["start_up_s"] / table["jobs"]
    table["start_up_share"] = table["start_up_s"] / table["wall_s"].where(table["wall_s"] > 0)  # the log has seconds
    table["sys_share"] = table["sys_s"] / (table["user_s"] + table["sys_s"])
    return table.sort_values("wall_s", ascending=False, kind="stable")


def latest_log(workdir: Path) -> Path:
    """The latest Snakemake log of `workdir` in which a job finished (not that of a dry run or `--report`)."""
    folder = workdir / ".snakemake" / "log"
    for log in sorted(folder.glob("*.snakemake.log"), reverse=True):
        if "Finished jobid" in log.read_text(errors="replace"):
            return log
    raise FileNotFoundError(f"no Snakemake log with a finished job under {folder}: run the workflow first")


def report(workdir: Path, log: Path, rules_dir: Path) -> str:
    """The profile as text: per stage, per rule, and the critical path."""
    jobs = parse_snakemake_log(log.read_text(errors="replace").splitlines())
    frame = job_frame(jobs, workdir, stage_of_rules(rules_dir))
    finished = [job for job in jobs.values() if job.end is not None]
    elapsed = (max(j.end for j in finished) - min(j.start for j in jobs.values())).total_seconds() if finished else 0
    chain = critical_path(jobs)
    lines = [f"run log {log}: {len(finished)} of {len(jobs)} jobs finished, {elapsed:.0f} s from first start to "
             "last finish", "", "per stage:", stage_table(frame).round(2).to_string(), "",
             "per rule:", stage_table(frame, "rule").round(2).to_string(), "",
             f"critical path ({sum(j.wall for j in chain):.0f} s of job wall in {len(chain)} jobs):"]
    lines.append("  started   waited    ran  job (waited: from its last input's end to its start: the scheduler's choice)")
    run_start = min((j.start for j in jobs.values()), default=None)
    previous = None
    for job in chain:  # the first job waits from the run's start
        waited = (job.start - (previous.end if previous else run_start)).total_seconds()
        lines.append(f"  {job.start:%H:%M:%S} {waited:6.0f} s {job.wall:4.0f} s  {job.rule} {job.wildcards}".rstrip())
        previous = job
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the run's working directory")
    parser.add_argument("--log", type=Path, help="a Snakemake run log (default: the workdir's latest)")
    parser.add_argument("--rules", type=Path, help="the workflow's rules/ folder, for the stage of each rule "
                        "(default: the workflow's, oversmooth.workflow.source)")
    args = parser.parse_args(argv)
    rules = args.rules or workflow_folder() / "rules"
    print(report(args.workdir, args.log or latest_log(args.workdir), rules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
