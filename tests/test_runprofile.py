"""The run profile: Snakemake's run log parsed into jobs, each job's start-up and CPU from its own log, the
critical path, and the per-stage sums."""

from datetime import datetime

import pytest

from oversmooth.core.logs import cpu_seconds, log_to_file, process_age
from oversmooth.workflow.runprofile import (
    critical_path,
    job_cost,
    job_frame,
    latest_log,
    parse_snakemake_log,
    report,
    stage_of_rules,
    stage_table,
)

RUN_LOG = """\
Select jobs to execute...
Execute 2 jobs...
[Tue Nov 24 02:27:00 2026]
localrule prepare_corpus:
    output: results/data/train.bin, results/data/eval_docs.parquet
    log: results/logs/data/prepare_corpus.log
    jobid: 1
    benchmark: results/benchmarks/data/prepare_corpus.tsv
    reason: Missing output files: results/data/train.bin
    resources: tmpdir=/tmp
[Tue Nov 24 02:27:10 2026]
Finished jobid: 1 (Rule: prepare_corpus)
[Tue Nov 24 02:27:10 2026]
localrule train_model:
    input: results/data/train.bin
    output: results/models/bn-4/best.pt
    log: results/logs/train/bn-4.log
    jobid: 2
    wildcards: model=bn-4
[Tue Nov 24 02:27:11 2026]
localrule select_prompts:
    input: results/data/eval_docs.parquet
    output: results/eval/prompts.parquet
    log: results/logs/eval/prompts.log
    jobid: 3
[Tue Nov 24 02:27:15 2026]
Finished jobid: 3 (Rule: select_prompts)
[Tue Nov 24 02:28:10 2026]
Finished jobid: 2 (Rule: train_model)
[Tue Nov 24 02:28:10 2026]
localrule extract_logits:
    input: results/models/bn-4/best.pt, results/eval/prompts.parquet
    output: results/logits/bn-4.parquet
    log: results/logs/logits/bn-4.log
    jobid: 4
    wildcards: model=bn-4
[Tue Nov 24 02:28:30 2026]
Finished jobid: 4 (Rule: extract_logits)
[Tue Nov 24 02:28:30 2026]
localrule metrics_table:
    input: results/logits/bn-4.parquet
    output: results/tables/table_4_1.csv
    jobid: 5
"""


def test_the_run_log_gives_each_job_its_rule_files_and_times():
    jobs = parse_snakemake_log(RUN_LOG.splitlines())
    assert sorted(jobs) == [1, 2, 3, 4, 5]
    train = jobs[2]
    assert (train.rule, train.wildcards, train.inputs, train.outputs) == (
        "train_model", "model=bn-4", ["results/data/train.bin"], ["results/models/bn-4/best.pt"])
    assert train.wall == 60.0 and jobs[1].outputs == ["results/data/train.bin", "results/data/eval_docs.parquet"]
    assert jobs[1].benchmark == "results/benchmarks/data/prepare_corpus.tsv"
    assert jobs[5].end is None  # still running when the log ends


GROUP_LOG = """\
[Tue Nov 24 02:28:10 2026] Group job cpu-short (jobs in lexicogr. order):

    [Tue Nov 24 02:28:10 2026]
    rule anisotropy:
        input: results/models/bn-4/best.pt
        output: results/rank/bn-4.anisotropy.csv
        jobid: 6
        wildcards: model=bn-4
Shell command: None

    [Tue Nov 24 02:28:10 2026]
    rule effective_rank:
        input: results/logits/bn-4.hidden.parquet
        output: results/rank/bn-4.effective_rank.csv
        jobid: 7
        wildcards: model=bn-4
Shell command: None
[Tue Nov 24 02:29:00 2026]
Finished jobid: 6 (Rule: anisotropy)
[Tue Nov 24 02:29:00 2026]
Finished jobid: 7 (Rule: effective_rank)
"""


def test_a_cluster_group_s_jobs_are_read_from_under_its_group_line():
    jobs = parse_snakemake_log((RUN_LOG + GROUP_LOG).splitlines())
    assert [(jobs[i].rule, jobs[i].wildcards, jobs[i].outputs, jobs[i].wall) for i in (6, 7)] == [
        ("anisotropy", "model=bn-4", ["results/rank/bn-4.anisotropy.csv"], 50.0),
        ("effective_rank", "model=bn-4", ["results/rank/bn-4.effective_rank.csv"], 50.0)]


# What a failed group leaves in the log (a local SLURM run of tests/test_slurm.py): the group's error, its jobs listed
# by rule and jobid, then each job's error
FAILED_GROUP_LOG = """\
[Tue Nov 24 02:29:30 2026]
    message: Error in group cpu-short
    log: .snakemake/slurm_logs/group_cpu-short_anisotropy_effective_rank/1.log (check log file(s) for error details)
    jobs:
        rule anisotropy:
            jobid: 6
            output: results/rank/bn-4.anisotropy.csv
        rule effective_rank:
            jobid: 7
            output: results/rank/bn-4.effective_rank.csv
    [Tue Nov 24 02:29:30 2026]
    Error in rule anisotropy:
        message: None
        jobid: 6
        output: results/rank/bn-4.anisotropy.csv
    [Tue Nov 24 02:29:30 2026]
    Error in rule effective_rank:
        message: None
        jobid: 7
        output: results/rank/bn-4.effective_rank.csv
"""


def test_a_failed_group_s_jobs_read_failed_and_keep_their_start():
    """Each job of the group is failed, as Snakemake reports it; the error's list of the group's jobs starts no job."""
    started = GROUP_LOG.split("[Tue Nov 24 02:29:00 2026]")[0]
    jobs = parse_snakemake_log((RUN_LOG + started + FAILED_GROUP_LOG).splitlines())
    assert [(jobs[i].rule, jobs[i].failed, jobs[i].end, jobs[i].start.minute) for i in (6, 7)] == [
        ("anisotropy", True, None, 28), ("effective_rank", True, None, 28)]
    assert jobs[7].inputs == ["results/logits/bn-4.hidden.parquet"]


def test_the_critical_path_follows_the_input_that_came_last():
    chain = critical_path(parse_snakemake_log(RUN_LOG.splitlines()))
    # the logits waited for the training (02:28:10), not the prompts (02:27:15)
    assert [job.rule for job in chain] == ["prepare_corpus", "train_model", "extract_logits"]


def test_a_job_log_gives_its_start_up_and_cpu_time_from_its_last_attempt(tmp_path):
    log = tmp_path / "job.log"
    with log_to_file(log):
        sum(i * i for i in range(200_000))
    with log_to_file(log):  # a second attempt: the profile reads this one
        pass
    lines = log.read_text().splitlines()
    assert sum("start-up:" in line for line in lines) == 2
    cost = job_cost(lines, datetime(2000, 1, 1))
    # start-up is counted from the process's start: here the test process, which may have run for many minutes
    assert 0 < cost.start_up_wall <= process_age() + 1 and 0 < cost.start_up_cpu <= sum(cpu_seconds()) + 1
    assert cost.user > 0 and cost.sys >= 0


def test_an_old_job_log_gives_its_start_up_from_its_first_line():
    lines = ["2026-11-24 02:27:13,500 INFO oversmooth: ==== attempt started: pid 1 on vm ====", "x"]
    cost = job_cost(lines, datetime(2026, 11, 24, 2, 27, 10))
    assert cost.start_up_wall == pytest.approx(3.5) and cost.user != cost.user  # NaN: the log does not say


def test_stage_sums_and_shares(tmp_path, repo):
    jobs = parse_snakemake_log(RUN_LOG.splitlines())
    logs = tmp_path / "results" / "logs"
    for path, (start_up, user, sys_) in {"train/bn-4.log": (2.0, 50.0, 10.0), "logits/bn-4.log": (4.0, 9.0, 1.0),
                                         "eval/prompts.log": (1.0, 1.5, 0.5)}.items():
        (logs / path).parent.mkdir(parents=True, exist_ok=True)
        (logs / path).write_text(f"t INFO oversmooth: start-up: {start_up} s wall, 1.0 CPU-s\n"
                                 f"t INFO oversmooth: job ended: 9 s wall, {user} CPU-s user, {sys_} CPU-s sys\n")
    stages = stage_of_rules(repo / "rules")
    assert stages["train_model"] == "train" and stages["train_segment"] == "train" and stages["tbat"] == "tbat"
    frame = job_frame(jobs, tmp_path, stages)
    assert len(frame) == 4  # the unfinished job is left out
    table = stage_table(frame)
    assert table.loc["train", "sys_share"] == pytest.approx(10 / 60)
    assert table.loc["logits", "start_up_share"] == pytest.approx(4 / 20)
    assert table.loc["total", "jobs"] == 4 and table.loc["total", "start_up_s"] == pytest.approx(7.0)
    assert table.loc["total", "wall_s"] == pytest.approx(10 + 60 + 4 + 20)
    instant = stage_table(frame.assign(wall_s=0.0))  # a job within one second of Snakemake's log has no share
    assert instant["start_up_share"].isna().all()


def test_the_report_reads_the_latest_run_that_ran_jobs_and_shows_the_wait_on_its_critical_path(tmp_path, repo):
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-11-24T022657.1.snakemake.log").write_text(RUN_LOG)
    (logs / "2026-11-24T033000.1.snakemake.log").write_text("Building DAG of jobs...\nNothing to be done.\n")  # a report
    text = report(tmp_path, latest_log(tmp_path), repo / "rules")
    assert "5 jobs" in text.splitlines()[0] and "4 of 5 jobs finished" in text.splitlines()[0]
    chain = text.split("critical path")[1].splitlines()
    assert "prepare_corpus" in chain[2] and "train_model model=bn-4" in chain[3]
    assert chain[3].split()[1] == "0"  # the training started as its corpus was ready: it waited 0 s


def test_the_target_rule_all_is_not_on_the_critical_path():
    log = RUN_LOG + ("[Tue Nov 24 02:28:31 2026]\nlocalrule all:\n    input: results/logits/bn-4.parquet\n"
                     "    jobid: 0\n[Tue Nov 24 02:28:31 2026]\nFinished jobid: 0 (Rule: all)\n")
    assert [job.rule for job in critical_path(parse_snakemake_log(log.splitlines()))][-1] == "extract_logits"
