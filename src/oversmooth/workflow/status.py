"""Where a run stands, from its files alone (local or SLURM, running or finished): per training its iteration of its
maximum, last validation loss, seconds per step and time left; per stage the jobs done, running, failed and left;
per rule the runtime and memory its jobs asked for beside what they used.

It reads, without taking Snakemake's lock or writing anything (so it works beside the running workflow):
- the latest Snakemake log of the run that planned jobs (`.snakemake/log/*.snakemake.log`, parsed by
  `runprofile.parse_snakemake_log`): the jobs planned per rule (its `Job stats` table), each job's start, end or
  failure and the resources it asked for; a log without Snakemake's closing line is that of a run still going;
- `.snakemake/incomplete/`: the outputs of jobs that started and have not finished (a stopped run's are rerun by
  `--rerun-incomplete`);
- each training's log (`results/models/<model>/train_log.partial.csv` as it goes, train_log.csv at its end), the
  settings beside its partial log and its config.json;
- each finished job's benchmark file (`results/benchmarks/**.tsv`: wall seconds `s`, peak resident memory `max_rss`).

    python -m oversmooth.workflow.status [--workdir DIR]      (make status WORKDIR=DIR)
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from oversmooth.core.layout import PARTIAL_TRAIN_LOG, PARTIAL_TRAIN_LOG_SETTINGS, RESULTS
from oversmooth.core.recovery import relative_or_absolute
from oversmooth.workflow.runprofile import Job, parse_snakemake_log, stage_of_rules

TRAIN_RULES = ("train_model", "train_segment")
JOB_STATS = "Job stats:"
CLOSING_LINE = "Complete log(s): "  # what Snakemake writes last, whether its run succeeded or failed
STATES = ("done", "running", "failed", "interrupted")  # a job's state in the log; `left`: planned and not started


@dataclass(frozen=True)
class Training:
    """Where one training stands, from its log."""

    model: str
    state: str  # done, running (a job of it runs), waiting (for its next job: a segment's or a retry's)
    iteration: int | None  # None: no evaluation yet
    max_iters: int | None
    val_loss: float
    seconds_per_step: float  # over its last evaluation interval, evaluation included

    @property
    def time_left_s(self) -> float:
        """Training time to `max_iters` at the last interval's pace (an early stop ends it sooner; a queue wait
        between a training's jobs is not counted)."""
        if self.state == "done" or self.max_iters is None or self.iteration is None:
            return math.nan
        return max(0, self.max_iters - self.iteration) * self.seconds_per_step


# ----------------------------------------------------------------------------------------------
# Snakemake's files


def run_log(workdir: Path) -> Path:
    """The latest Snakemake log of `workdir` that planned jobs (a dry run, `--report` or a run with nothing to do
    leaves none of those)."""
    folder = workdir / ".snakemake" / "log"
    for log in sorted(folder.glob("*.snakemake.log"), reverse=True):
        if JOB_STATS in log.read_text(errors="replace"):
            return log
    raise FileNotFoundError(f"no Snakemake log that planned jobs under {folder}: has the run started?")


def planned_jobs(lines: Iterable[str]) -> dict[str, int]:
    """Jobs per rule from the first `Job stats` table of a Snakemake log (the run's plan; `all` and the total left
    out)."""
    planned: dict[str, int] = {}
    lines = iter(lines)
    for line in lines:
        if line.strip() == JOB_STATS:
            break
    else:
        return planned
    for line in lines:
        words = line.split()
        if not words:
            if planned:
                break
            continue
        if len(words) == 2 and words[1].isdigit() and words[0] not in ("all", "total"):
            planned[words[0]] = int(words[1])
    return planned


def run_ended(lines: Sequence[str]) -> bool:
    return any(line.startswith(CLOSING_LINE) for line in lines[-5:])


def job_state(job: Job, ended: bool) -> str:
    """done, failed, running, or interrupted (started in a log that ended without it: its controller stopped)."""
    if job.end is not None:
        return "done"
    if job.failed:
        return "failed"
    return "interrupted" if ended else "running"


def incomplete_outputs(workdir: Path) -> int:
    """How many outputs Snakemake marked incomplete (`.snakemake/incomplete/`, a file per output): those of the jobs
    that started and have not finished."""
    folder = workdir / ".snakemake" / "incomplete"
    return sum(1 for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def stage_counts(planned: Mapping[str, int], jobs: Mapping[int, Job], ended: bool,
                 stages: Mapping[str, str]) -> pd.DataFrame:
    """Per stage: jobs planned, done, running, failed, interrupted, and left (planned, not started)."""
    rules = pd.DataFrame({"planned": pd.Series(planned, dtype=int)})
    states = pd.DataFrame([(job.rule, job_state(job, ended)) for job in jobs.values() if job.rule != "all"],
                          columns=["rule", "state"])
    counts = pd.crosstab(states["rule"], states["state"]) if len(states) else pd.DataFrame()
    table = rules.join(counts.reindex(columns=list(STATES)), how="outer").fillna(0).astype(int)
    table["left"] = (table["planned"] - table[list(STATES)].sum(axis=1)).clip(lower=0)
    table["stage"] = [stages.get(rule, "?") for rule in table.index]
    by_stage = table.groupby("stage").sum()
    by_stage.loc["total"] = by_stage.sum()
    return by_stage[["planned", *STATES, "left"]].reset_index()


# ----------------------------------------------------------------------------------------------
# The trainings' logs


def whole_rows(path: Path) -> pd.DataFrame:
    """A training log's rows, a row still being written (no line end yet) left out."""
    text = path.read_bytes().decode(errors="replace")
    whole = text[: text.rfind("\n") + 1]
    return pd.read_csv(io.StringIO(whole)) if whole else pd.DataFrame()


def current_log(folder: Path) -> Path | None:
    """The log of a training's latest run: the partial one while it goes, train_log.csv once written (whichever is
    newer: a rerun's partial log grows beside the train_log.csv of the run before it)."""
    logs = [p for p in (folder / PARTIAL_TRAIN_LOG, folder / "train_log.csv") if p.is_file()]
    return max(logs, key=lambda p: p.stat().st_mtime_ns) if logs else None


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # absent, or written over right now: the reader goes without
        return {}


def training_progress(folder: Path, running: bool) -> Training | None:
    """Where the training in `folder` stands (None: neither running nor with a row in a log)."""
    log = current_log(folder)
    rows = whole_rows(log) if log else pd.DataFrame()
    if rows.empty and not running:
        return None
    finished = log is not None and log.name != PARTIAL_TRAIN_LOG
    settings = (_read_json(folder / "config.json").get("train", {}) if finished
                else _read_json(folder / PARTIAL_TRAIN_LOG_SETTINGS))
    state = "running" if running else "done" if finished else "waiting"
    max_iters = None if settings.get("max_iters") is None else int(settings["max_iters"])
    if rows.empty:
        return Training(folder.name, state, None, max_iters, math.nan, math.nan)
    pace = rows.iloc[-2:].diff().iloc[-1]  # NaN for a single row
    per_step = float(pace["seconds"] / pace["iteration"]) if pace["iteration"] > 0 else math.nan
    return Training(folder.name, state, int(rows["iteration"].iloc[-1]), max_iters,
                    float(rows["val_loss"].iloc[-1]), per_step)


def running_trainings(jobs: Mapping[int, Job], ended: bool) -> set[str]:
    """The models a training job of the log is running for."""
    models = {dict(item.split("=", 1) for item in job.wildcards.split(", ") if "=" in item).get("model")
              for job in jobs.values() if job.rule in TRAIN_RULES and job_state(job, ended) == "running"}
    return models - {None}


def trainings(workdir: Path, running: set[str]) -> list[Training]:
    """Every training of the run that runs or has a row in its log, by model name."""
    models = workdir / RESULTS / "models"
    names = sorted({p.name for p in models.glob("*") if p.is_dir()} | running)
    found = (training_progress(models / name, name in running) for name in names)
    return [training for training in found if training is not None]


# ----------------------------------------------------------------------------------------------
# Requested against used


def _number(value: str | None) -> float:
    try:
        return float(value) if value is not None else math.nan
    except ValueError:
        return math.nan


def benchmark(path: Path) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB) of a job's benchmark file, its last attempt's (NaN where it does
    not say)."""
    try:
        row = pd.read_csv(path, sep="\t").iloc[-1]
    except (OSError, ValueError, IndexError):
        return math.nan, math.nan
    return _number(str(row.get("s"))), _number(str(row.get("max_rss")))


def resource_use(jobs: Mapping[int, Job], workdir: Path) -> pd.DataFrame:
    """Per rule, over its finished jobs with a benchmark: the most runtime (min) and memory (MB) a job asked for,
    the most one used, and the largest share of its request a job used (what to tune `resources` by)."""
    rows = []
    for job in jobs.values():
        if job.end is None or not job.benchmark:
            continue
        wall_s, rss_mb = benchmark(workdir / job.benchmark)
        runtime_min, mem_mb = _number(job.resources.get("runtime")), _number(job.resources.get("mem_mb"))
        rows.append({"rule": job.rule, "runtime_min": runtime_min, "max_wall_s": wall_s,
                     "runtime_use": wall_s / (60 * runtime_min), "mem_mb": mem_mb, "max_rss_mb": rss_mb,
                     "mem_use": rss_mb / mem_mb})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    table = frame.groupby("rule").max()
    table.insert(0, "jobs", frame.groupby("rule").size())
    return table


# ----------------------------------------------------------------------------------------------
# The text


def duration(seconds: float) -> str:
    """`H:MM:SS` (hours past 24 kept as hours), `-` where unknown."""
    if not math.isfinite(seconds):
        return "-"
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def _share(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{100 * value:.1f}%"


def _amount(value: float, digits: int = 0) -> str:
    return "-" if not math.isfinite(value) else f"{value:.{digits}f}"


def text_table(frame: pd.DataFrame, left: int = 1) -> str:
    """A frame as aligned text, without its index: its first `left` columns to the left, the others to the
    right."""
    cells = [[str(name) for name in frame.columns], *([str(v) for v in row] for row in frame.itertuples(index=False))]
    widths = [max(len(row[i]) for row in cells) for i in range(len(frame.columns))]
    return "\n".join("  ".join(cell.ljust(width) if i < left else cell.rjust(width)
                               for i, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in cells)


def training_table(found: Sequence[Training]) -> str:
    rows = [{"model": t.model, "state": t.state,
             "iteration": f"{'-' if t.iteration is None else t.iteration}/{'?' if t.max_iters is None else t.max_iters}",
             "val_loss": _amount(t.val_loss, 4), "s/step": _amount(t.seconds_per_step, 3),
             "time left": duration(t.time_left_s)} for t in found]
    return text_table(pd.DataFrame(rows), left=2)


def resource_text(table: pd.DataFrame) -> str:
    shown = pd.DataFrame({
        "rule": table.index,
        "jobs": table["jobs"],
        "runtime_min": table["runtime_min"].map(_amount),
        "max_wall": table["max_wall_s"].map(duration),
        "runtime_use": table["runtime_use"].map(_share),
        "mem_mb": table["mem_mb"].map(_amount),
        "max_rss_mb": table["max_rss_mb"].map(_amount),
        "mem_use": table["mem_use"].map(_share),
    })
    return text_table(shown)


def status(workdir: Path, rules_dir: Path, log: Path | None = None, now: float | None = None) -> str:
    """The run's status as text: its Snakemake log (default: the latest that planned jobs), its trainings, its jobs
    per stage, and (for finished jobs) each rule's requested runtime and memory beside what its jobs used."""
    log = log or run_log(workdir)
    lines = log.read_text(errors="replace").splitlines()
    jobs = parse_snakemake_log(lines)
    ended = run_ended(lines)
    planned = planned_jobs(lines)
    counts = stage_counts(planned, jobs, ended, stage_of_rules(rules_dir))
    age = (time.time() if now is None else now) - log.stat().st_mtime
    state = "ended" if ended else f"running (its log last written {duration(age)} ago)"
    total = counts.set_index("stage").loc["total"]
    out = [f"Snakemake log {relative_or_absolute(log, workdir)}: {state}; {total['done']} of {total['planned']} jobs done"]
    marked = incomplete_outputs(workdir)
    if ended and marked:
        out.append(f"{marked} outputs marked incomplete in .snakemake/incomplete: their jobs started and did not "
                   "finish; `--rerun-incomplete` reruns them")
    found = trainings(workdir, running_trainings(jobs, ended))
    if found:
        out += ["", "trainings:", training_table(found)]
    out += ["", "jobs per stage (left: planned, not started):", text_table(counts)]
    use = resource_use(jobs, workdir)
    if not use.empty:
        out += ["", "asked for and used per rule, finished jobs (use: the largest share of its request a job used):",
                resource_text(use)]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("."), help="the run's folder (snakemake --directory)")
    parser.add_argument("--rules", type=Path, default=Path(__file__).resolve().parents[3] / "rules",
                        help="the workflow's rules/ folder (for the stage of each rule)")
    parser.add_argument("--log", type=Path, help="a Snakemake run log (default: the workdir's latest that planned jobs)")
    args = parser.parse_args(argv)
    print(status(args.workdir, args.rules, args.log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
