"""Snakemake end to end on config/smoke.yaml, in a temporary working directory."""

import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from workflow_helpers import (
    SNAKEMAKE,
    demo_dry_run,
    follow_advice,
    jobs_an_edit_reruns,
    min_q_i_by_interior_point,
    planned_jobs,
    planned_rules,
    repo_config,
    report_rules,
    repository_copy,
    rule_blocks,
    rules_running,
    snakemake,
    touched_run,
)

import oversmooth
from oversmooth.core.catalog import byte_bat_methods
from oversmooth.core.io import sha256_file
from oversmooth.workflow.config import load_config
from oversmooth.workflow.outputs import TOKEN_SUFFIX, outputs_of

RUNS = ["bn-4", "bn-4-s8", "bn-64", "bn-64-s8"]  # config/smoke.yaml: bottlenecks [4, 64], train.seeds [8]
SEED_ROWS = ["bn-4 (2 seeds: mean)", "bn-4 (2 seeds: sd)", "bn-64 (2 seeds: mean)", "bn-64 (2 seeds: sd)"]
BOTTLENECK_ROWS = [*RUNS[:2], *SEED_ROWS[:2], *RUNS[2:], *SEED_ROWS[2:]]  # each k's runs, then their mean and sd


def dry_run_with_override(smoke_run, folder, override_yaml: str) -> str:
    """Output of `snakemake -n all` on the finished smoke run with one more config file on top."""
    _, workdir, _ = smoke_run
    override = folder / "override.yaml"
    override.write_text(override_yaml)
    result = snakemake(workdir, "-n", "all", overrides=[override])
    return result.stdout + result.stderr


def new_jobs(smoke_run, folder, override_yaml: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]], str]:
    """(jobs, model jobs) that an override plans beyond the rules already pending on the smoke run (an earlier test
    may have left work), split into all of them and those outside the report rules; and the dry run's output."""
    _, workdir, _ = smoke_run
    unchanged = planned_rules(snakemake(workdir, "-n", "all").stdout)
    output = dry_run_with_override(smoke_run, folder, override_yaml)
    jobs = [(rule, wildcards) for rule, wildcards in planned_jobs(output) if rule not in unchanged]
    return jobs, [(rule, wildcards) for rule, wildcards in jobs if rule not in report_rules()], output


@pytest.mark.workflow
def test_dry_run_lists_every_rule(smoke_run):
    _, _, dry_output = smoke_run
    expected = {
        "prepare_corpus", "select_prompts", "train_model", "evaluate_model", "table_3_1", "training_figure",
        "extract_logits", "oversmoothing_metrics", "metrics_table", "position_figure", "figure_4_2", "figure_4_3",
        "tbat", "unargmaxable", "table_b", "time_metrics", "table_i_1", "sample", "sample_with_bat", "sample_direct",
        "sample_bat", "join_samples", "convert_smollm2", "quality", "quality_table", "sample_table", "figure_5_1",
        "svd_model", "effective_rank", "table_7_3", "ngram_rank",
        "anisotropy", "table_godey_anisotropy", "figure_godey_anisotropy", "rank_constrained_head",
        "figure_godey_rank_loss", "checkpoint_model", "loss_matched", "figure_loss_matched",
        "token_states", "token_head", "figure_token_heads", "token_prompts", "figure_token_quality", "findings",
        "figure_token_bottleneck", "token_findings", "bat_decode", "all",
    }
    assert planned_rules(dry_output) == expected


@pytest.mark.workflow
def test_smoke_run_produces_shards_prompts_and_manifest(smoke_run):
    _, workdir, _ = smoke_run
    data = workdir / "results" / "data"
    manifest = json.loads((data / "manifest.json").read_text())
    for split in ("train", "val"):
        shard = np.memmap(data / f"{split}.bin", dtype=np.uint8, mode="r")
        assert shard.size == manifest["splits"][split]["bytes"] > 0
        assert sha256_file(data / f"{split}.bin") == manifest["splits"][split]["sha256"]
    assert manifest["sources"][0]["bytes"] == 600000  # smoke budget
    prompts = pq.read_table(data / "prompts.parquet")
    assert prompts.num_rows == 8
    assert (workdir / "results" / "logs" / "data" / "prepare_corpus.log").read_text().count("wrote train") == 1
    assert (workdir / "results" / "benchmarks" / "data" / "prepare_corpus.tsv").exists()


@pytest.mark.workflow
def test_smoke_run_trains_every_model_and_writes_table_3_1(smoke_run):
    _, workdir, _ = smoke_run
    results = workdir / "results"
    table = pd.read_csv(results / "tables" / "table_3_1.csv")
    assert table["model"].tolist() == [*BOTTLENECK_ROWS, "mos-4", "gt-nanogpt"]
    assert table["heldout_loss"].notna().all() and (table["accuracy_pct"] > 0).all()
    for model in (*RUNS, "mos-4", "gt-nanogpt"):
        folder = results / "models" / model
        assert sorted(p.name for p in folder.iterdir()) == ["best.pt", "config.json", "kept", "last.pt", "train_log.csv"]
        assert "reached max_iters" in (results / "logs" / "train" / f"{model}.log").read_text()
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_3_1.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_one_bottleneck_reruns_only_that_model_and_its_descendants(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "model_overrides:\n  bn-4:\n    train: {max_iters: 30}\n")
    assert planned_rules(output) == {
        "train_model", "evaluate_model", "table_3_1", "training_figure", "extract_logits", "oversmoothing_metrics",
        "metrics_table", "position_figure", "figure_4_2", "figure_4_3", "tbat", "unargmaxable", "table_b",
        "time_metrics", "table_i_1", "sample_with_bat", "quality", "quality_table", "sample_table", "figure_5_1",
        "effective_rank", "table_7_3", "anisotropy", "table_godey_anisotropy", "figure_godey_anisotropy",
        "rank_constrained_head", "figure_godey_rank_loss", "checkpoint_model", "loss_matched", "figure_loss_matched",
        "findings", "bat_decode", "all",
    }  # no svd_model: the SVD heads come from bn-64, the widest bottleneck; no ngram_rank: the data is unchanged
    assert "wildcards: model=bn-4" in output
    assert "model=bn-64" not in output and "model=gt-nanogpt" not in output


@pytest.mark.workflow
def test_rerun_after_a_complete_run_has_nothing_to_do(smoke_run):
    _, workdir, _ = smoke_run
    result = snakemake(workdir, "-n", "all")
    assert "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.workflow
def test_changing_a_prompt_setting_reruns_the_prompts_and_their_readers_not_training(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "eval:\n  n_prompts: 5\n")
    assert planned_rules(output) == {
        "select_prompts", "extract_logits", "oversmoothing_metrics", "metrics_table",
        "position_figure", "figure_4_2", "figure_4_3", "tbat", "time_metrics", "table_i_1",
        "sample", "sample_with_bat", "quality", "quality_table", "sample_table", "figure_5_1", "effective_rank",
        "table_7_3", "anisotropy", "table_godey_anisotropy", "figure_godey_anisotropy", "loss_matched",
        "figure_loss_matched", "token_states", "figure_token_heads", "figure_token_bottleneck", "findings", "token_findings",
        "bat_decode", "all",
    }


@pytest.mark.workflow
@pytest.mark.parametrize(("override", "message"), [
    ("eval:\n  window: -5\n", "eval.window: -5 is less than the minimum of 1"),
    # a missing model folder passed validation and the dry run, and failed at job time after other jobs
    ("ground_truths:\n  - {name: evabyte, kind: hf, path: /nowhere/EvaByte}\n",
     "ground_truths[0].path: no folder '/nowhere/EvaByte'"),
    # a folder that holds no model passed too, and other jobs rewrote outputs before transformers' traceback
    ("ground_truths:\n  - {name: evabyte, kind: hf, path: /}\n",
     "ground_truths[0].path: the folder '/' holds no model: no config.json"),
    # files that exist but are empty passed, and the failed data job took the finished corpus with it
    ("data:\n  sources:\n    - {kind: files, paths: [/dev/null]}\n",
     "data.sources[0].paths: source 'files0': all 1 file(s) are empty (/dev/null)"),
])
def test_a_bad_config_fails_before_any_job_naming_the_key(tmp_path, repo, override, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(override)
    cmd = [str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(bad), "-n"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


@pytest.mark.workflow
def test_smoke_run_writes_logits_metrics_tables_and_figures(smoke_run):
    from oversmooth.analysis.metrics import POSITION_SCHEMA
    from oversmooth.extraction.logit_tables import LOGITS_SCHEMA

    _, workdir, _ = smoke_run
    results = workdir / "results"
    for model in ("bn-4", "bn-64", "gt-nanogpt"):
        logits = pq.ParquetFile(results / "logits" / f"{model}.parquet")
        assert logits.schema_arrow.equals(LOGITS_SCHEMA) and logits.metadata.num_rows == 8 * 64
        assert pq.read_table(results / "logits" / f"{model}.hidden.parquet").num_rows == 32
    positions = pq.read_table(results / "metrics" / "bn-4__gt-nanogpt.parquet")
    assert positions.schema.equals(POSITION_SCHEMA) and positions.num_rows == 8 * 64 * 9 + 2 * 24  # 9 methods; BA at 24
    table = pd.read_csv(results / "tables" / "table_4_1.csv")
    assert table["model"].tolist() == [*BOTTLENECK_ROWS, "mos-4"]  # the MoS member gets its own row
    table = table[~table["model"].str.endswith("seeds: sd)")]  # the sd rows: spreads, not metrics
    plain = table[table["model"] != "mos-4"]
    assert plain["TBAT n_positions"].tolist() == [24] * 6 and (plain["TBAT n_failed"] == 0).all()
    assert ((plain["TBAT mean"] > 0) & (plain["TBAT mean"] <= 1)).all()  # k = 4, 64 < 256: both heads are low rank
    assert table.loc[table["model"] == "mos-4", "TBAT mean"].isna().all()  # TBAT assumes one linear head
    assert (table["TTO mean (gt-nanogpt)"] >= table["NSMD mean (gt-nanogpt)"]).all()
    low, high = table["TTO ci_low (gt-nanogpt)"], table["TTO ci_high (gt-nanogpt)"]
    assert ((low <= table["TTO mean (gt-nanogpt)"]) & (table["TTO mean (gt-nanogpt)"] <= high)).all()
    table_6_1 = pd.read_csv(results / "tables" / "table_6_1.csv")
    assert list(table_6_1.columns[3:12]) == ["Pure mean", "Greedy mean", "Top-K mean", "Top-P mean", "Temp. mean",
                                             "Epsilon mean", "Eta mean", "Typical mean", "Min-P mean"]  # config order
    assert all(c.startswith("BA-") or c == "positions" for c in table_6_1.columns[12:])  # BA where it is measured
    kl = table_6_1[(table_6_1["metric"] == "KL") & ~table_6_1["model"].str.endswith("seeds: sd)")]
    assert np.isinf(kl["Greedy mean"]).all() and np.isfinite(kl["Pure mean"]).all()  # never a silent epsilon
    for name in ("table_4_2", "table_e_1", "table_e_2", "table_e_7", "table_e_8", "table_f_1"):
        assert len(pd.read_csv(results / "tables" / f"{name}.csv")) > 0
    for name, rows in (("table_truncation_nanogpt", 5 * (len(BOTTLENECK_ROWS) + 1)),  # 5 metrics, mos-4's too
                       ("table_truncation_tbat", len(BOTTLENECK_ROWS))):
        truncation = pd.read_csv(results / "tables" / f"{name}.csv")  # the third group: its own table, no E number
        assert len(truncation) == rows and {"Epsilon mean", "Eta mean", "Typical mean", "Min-P mean"} <= set(
            truncation.columns) and not {"Pure mean", "Greedy mean", "Top-P mean"} & set(truncation.columns), name
    for name in ("figure_4_1", "figure_4_2", "figure_4_3", "figure_7_1"):
        for ext in ("png", "pdf"):
            assert (results / "figures" / f"{name}.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_a_metric_setting_reruns_metrics_and_tables_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "metrics:\n  tau: 0.8\n")
    assert planned_rules(output) == {
        "oversmoothing_metrics", "metrics_table", "position_figure", "figure_4_2", "time_metrics", "table_i_1",
        "loss_matched", "figure_loss_matched", "figure_token_heads", "findings", "all",
    }


@pytest.mark.workflow
def test_a_setting_given_with_config_on_the_command_line_reruns_like_an_override_file(smoke_run):
    _, workdir, _ = smoke_run
    result = snakemake(workdir, "-n", "all", "--config", 'metrics={"tau": 0.8}')
    assert planned_rules(result.stdout + result.stderr) == {
        "oversmoothing_metrics", "metrics_table", "position_figure", "figure_4_2", "time_metrics", "table_i_1",
        "loss_matched", "figure_loss_matched", "figure_token_heads", "findings", "all",
    }


@pytest.mark.workflow
def test_thread_counts_and_job_settings_rerun_nothing(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "train:\n  threads: 2\ntbat:\n  threads: 2\n"
                                   "resources:\n  inference_threads: 2\n  metrics_threads: 2\n  stop_margin_s: 60\n"
                                   "  max_mem_mb: 9000\n  runtime_min: {train: 5}\n")
    assert "Nothing to be done" in output


@pytest.mark.workflow
def test_splitting_a_training_into_jobs_plans_its_segments_and_changes_no_setting(smoke_run, tmp_path):
    """train.iters_per_job decides how a training runs, not what it computes: no params change (the trainings
    replan only because their jobs' inputs change, as docs/cluster.md says: set it before a training starts)."""
    _, workdir, _ = smoke_run
    output = dry_run_with_override(smoke_run, tmp_path, "train:\n  iters_per_job: 7\n")
    assert "params changed" not in output.lower() and "Params have changed" not in output
    jobs = planned_jobs(output)
    segments = sorted(w for r, w in jobs if r == "train_segment" and w.startswith("model=bn-4,"))
    assert segments == ["model=bn-4, iteration=14", "model=bn-4, iteration=7"]


FIGURE_RULES = {"figure_4_2", "figure_4_3", "figure_5_1", "figure_token_heads", "figure_token_quality",
                "figure_token_bottleneck", "position_figure", "training_figure", "figure_godey_anisotropy",
                "figure_godey_rank_loss", "figure_loss_matched"}


@pytest.mark.workflow
def test_comments_and_docstrings_rerun_nothing(smoke_run, tmp_path):
    _, workdir, _ = smoke_run
    copy, env = repository_copy(tmp_path)
    module = copy / "src" / "oversmooth" / "generation" / "quality.py"
    source = module.read_text()
    module.write_text(source.replace('"""Sample quality', '"""Sample quality, reworded', 1) + "\n# a new comment\n")
    script = copy / "workflow" / "scripts" / "tbat.py"
    edit(script, '"""Snakemake adapter:', '"""Snakemake adapter (reworded):')
    edit(script, "smk = snakemake", "# a new comment\n\n\nsmk = snakemake")
    unchanged = snakemake(workdir, "-n", "all", repo=copy, env=env)
    assert "Nothing to be done" in unchanged.stdout + unchanged.stderr  # the same code, the same scripts


@pytest.mark.workflow
@pytest.mark.parametrize("module, before, planned", [
    # the script that runs oversmooth.generation.quality (the quality job), and what reads its outputs; no training,
    # logits, metrics or TBAT, not the SmolLM2 conversion (oversmooth.models.causallm), not the samples' table or
    # Figure 5.1; the findings read Table 5.3
    ("generation.quality", "def words(", {"quality", "quality_table", "figure_token_quality", "findings"}),
    # plotting code: the figures and nothing else
    ("reporting.figures", "def figure_4_2(", FIGURE_RULES),
    # the BAT solver: TBAT, Table I.1's timings of it, and the tables that show TBAT (4.1, E.7, E.8, the
    # loss-matched table), the findings read from them and the token track's figure of them; and BAT sampling's
    # jobs (a byte model's sample_with_bat, a token head's sample_bat and its join; no sampling of a model without
    # BAT methods, rule sample: the SVD heads and mos-4; no token head's direct sampling) with the quality jobs and
    # tables that read the samples; and the bottlenecks' BA-decoded rows (bat_decode) with the metrics jobs that
    # read them and Figure 4.2; no model
    ("analysis.bat.solver", "class BATSolver",
     {"tbat", "time_metrics", "table_i_1", "metrics_table", "loss_matched", "figure_loss_matched", "findings",
      "token_findings", "figure_token_bottleneck", "sample_with_bat", "sample_bat", "join_samples", "quality",
      "quality_table", "sample_table", "figure_5_1", "figure_token_quality", "bat_decode", "oversmoothing_metrics",
      "figure_4_2"}),
    # a metric's formula: the metrics, their timings, and the tables and figures of their summaries; no sample-quality
    # table, training or other figure (quality_table, sample_table, training_figure and four figures
    # would reach the formulas through `metrics_report`'s byte frequencies)
    ("analysis.metrics", "def oversmoothing_against(",
     {"oversmoothing_metrics", "time_metrics", "table_i_1", "metrics_table", "position_figure", "figure_4_2",
      "figure_4_3", "loss_matched", "figure_loss_matched", "figure_token_heads", "figure_token_bottleneck", "findings",
      "token_findings"}),
])
def test_editing_library_code_reruns_the_rules_that_run_it_naming_the_module(smoke_run, tmp_path, module, before,
                                                                              planned):
    _, workdir, _ = smoke_run
    copy, env = repository_copy(tmp_path)
    path = copy / "src" / "oversmooth" / f"{module.replace('.', '/')}.py"
    path.write_text(path.read_text().replace(before, f"UNUSED_CONSTANT = 1\n\n\n{before}", 1))
    changed = snakemake(workdir, "-n", "all", repo=copy, env=env)
    output = changed.stdout + changed.stderr
    assert planned_rules(output) == planned | {"all"}
    # as many jobs as the whole DAG's jobs of those rules and what is computed from them: what docs/dag.md counts
    (tmp_path / "empty").mkdir()
    assert Counter(rule for rule, _ in planned_jobs(output)) == jobs_an_edit_reruns(module, tmp_path / "empty",
                                                                                    "smoke.yaml")
    # the reason names the edited module, before and now (one param per module)
    reasons = [line for line in output.splitlines() if "Params have changed" in line]
    assert reasons and all(f"oversmooth.{module} " in line for line in reasons), reasons[:3]


@pytest.mark.workflow
@pytest.mark.parametrize("script, planned", [
    # TBAT's script: the TBAT jobs and what reads their files; not Table I.1's timings, which run the solver's module
    # but not this script
    ("tbat", {"tbat", "metrics_table", "loss_matched", "figure_loss_matched", "findings", "token_findings",
              "figure_token_bottleneck"}),
    # a table's script: that table alone
    ("table_7_3", {"table_7_3"}),
])
def test_editing_a_workflow_script_reruns_its_rule_and_what_reads_its_outputs_naming_the_script(smoke_run, tmp_path,
                                                                                             script, planned):
    """The profile has no `code` trigger: a script's own code is a param of its rule (`code_script`), as the library
    modules it runs are. A script edit once reran nothing ("Nothing to be done")."""
    _, workdir, _ = smoke_run
    copy, env = repository_copy(tmp_path)
    edit(copy / "workflow" / "scripts" / f"{script}.py", "smk = snakemake", "UNUSED_CONSTANT = 1\nsmk = snakemake")
    changed = snakemake(workdir, "-n", "all", repo=copy, env=env)
    output = changed.stdout + changed.stderr
    assert planned_rules(output) == planned | {"all"}
    reasons = [line for line in output.splitlines() if "Params have changed" in line]
    assert reasons and all(f"workflow/scripts/{script}.py " in line for line in reasons), reasons[:3]


def edit(path: Path, old: str, new: str) -> None:
    """Replace `old` by `new` once in a file of a repository copy; fail naming the file when `old` is not there (a
    recipe's anchor moved)."""
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.workflow
def test_a_metric_formula_edit_reruns_76_demo_jobs(tmp_path):
    """docs/dag.md's count for the demo (a finished one: every job of the rules whose scripts reach the formulas, and
    what is computed from theirs). It was 92, not the 89 the docs said: quality_table, sample_table and
    training_figure reached the formulas through `metrics_report`'s byte frequencies, and four figures too."""
    jobs = jobs_an_edit_reruns("analysis.metrics", tmp_path)
    assert sum(jobs.values()) == 76, jobs  # 73 before the truncation samplers' three tables
    assert jobs["oversmoothing_metrics"] == 38 and jobs["metrics_table"] == 21  # the demo's pairs and tables
    assert not set(jobs) & {"quality_table", "sample_table", "training_figure", "figure_5_1", "tbat", "quality"}


@pytest.mark.workflow
def test_a_bat_solver_edit_reruns_82_demo_jobs(tmp_path):
    """docs/dag.md's count for the demo: the jobs of the rules whose scripts reach the solver, and what is computed
    from theirs. The samples of the models that sample no BAT method (rule sample: svd-r4, svd-r32) and their quality
    jobs are not among them: they were (87 jobs), when one script sampled every byte model."""
    jobs = jobs_an_edit_reruns("analysis.bat.solver", tmp_path)
    assert sum(jobs.values()) == 82, jobs
    assert jobs["tbat"] == 20 and jobs["bat_decode"] == 5 and jobs["oversmoothing_metrics"] == 10, jobs
    assert jobs["sample_with_bat"] == 5 and jobs["quality"] == 5 and jobs["metrics_table"] == 16, jobs
    assert not set(jobs) & {"sample", "sample_direct", "train_model", "extract_logits", "svd_model"}, jobs


@pytest.mark.workflow
def test_a_method_list_change_plans_81_demo_jobs_and_no_table_that_reads_nothing_it_changed(tmp_path):
    """docs/dag.md's counts, on a demo run finished without computing (`touched_run`): each metrics table's params
    are its own table's, so that removing a method (or every BAT method) reruns neither the token track's tables,
    whose heads are measured after `tokens.methods`, nor Tables 7.1 and 7.2, whose SVD heads after `svd.decoding`.
    Every metrics table's params held every table's methods once: 91 and 61 jobs."""
    touched_run(tmp_path / "demo")
    unchanged = {"table_7_1", "table_7_2", *metrics_tables_of_the_token_track("config.yaml")}
    override = tmp_path / "override.yaml"
    for settings, count in (("methods: [pure, greedy, top_k, top_p, temperature, epsilon, eta, typical]", 81),
                            ("bat_methods: []", 51)):
        override.write_text(f"decoding:\n  {settings}\n")
        jobs = planned_jobs(demo_dry_run(tmp_path / "demo", override))
        tables = {wildcards.removeprefix("table=") for rule, wildcards in jobs if rule == "metrics_table"}
        assert len(jobs) == count and len(tables) == 13 and not tables & unchanged, (settings, len(jobs), tables)
        assert not {"figure_token_bottleneck", "token_findings"} & {rule for rule, _ in jobs}, settings


def metrics_tables_of_the_token_track(config: str) -> set[str]:
    """The token track's metrics tables that config/<config> builds."""
    return {name for name in outputs_of(repo_config(config), "metrics_table") if name.endswith(TOKEN_SUFFIX)}


@pytest.mark.workflow
@pytest.mark.parametrize("override, token_tables_rerun", [
    # BAT sampling's methods out of the byte track: the token track's heads are measured after decoding.methods
    ("decoding:\n  bat_methods: []\ntokens:\n  sampling:\n    methods: [pure, top_p, mirostat]\n", False),
    # a truncation sampler out: the token track's heads are measured after it (tokens.methods null), the SVD heads
    # after svd.decoding (pure) only
    ("decoding:\n  methods: [pure, greedy, top_k, top_p, temperature, epsilon, eta, typical]\n", True),
])
def test_a_method_list_change_reruns_no_metrics_table_that_reads_nothing_it_changed(smoke_run, tmp_path, override,
                                                                                    token_tables_rerun):
    """Each metrics table's params carry its own table's rows, methods and ground truth: a method list change reruns
    the tables that show a changed method or read a changed summary, not every table (all of them once)."""
    jobs = planned_jobs(dry_run_with_override(smoke_run, tmp_path, override))
    tables = {wildcards.removeprefix("table=") for rule, wildcards in jobs if rule == "metrics_table"}
    token_tables = metrics_tables_of_the_token_track("smoke.yaml")
    assert "table_6_1" in tables and not tables & {"table_7_1", "table_7_2"}, tables
    assert (tables >= token_tables) if token_tables_rerun else not tables & token_tables, tables


HELLINGER = """

def hellinger(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(0.5 * np.square(np.sqrt(p) - np.sqrt(q)).sum(-1), 0.0))


def oversmoothing_against("""


@pytest.mark.workflow
def test_the_add_a_metric_recipe_reruns_the_metric_jobs_and_adds_its_column(smoke_run, tmp_path):
    """docs/architecture.md's add-a-metric recipe on a copy of the repository and of the finished smoke run: a
    Hellinger distance in `oversmoothing_against`, `METRICS` and the labels; Snakemake plans only the jobs that run
    the metrics' code (no training, logits or samples), and a rerun metrics job writes and summarises the column."""
    from oversmooth.core.catalog import bottleneck_models, ground_truth_models
    from oversmooth.core.layout import metrics_path

    _, workdir, _ = smoke_run
    copy, env = repository_copy(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(workdir, run, symlinks=True)
    metrics, library = copy / "src" / "oversmooth" / "analysis" / "metrics.py", copy / "src" / "oversmooth"
    edit(metrics, '"kl_eps", "entropy_diff")', '"kl_eps", "entropy_diff", "hellinger")')  # METRICS
    edit(metrics, "\n\ndef oversmoothing_against(", HELLINGER)
    edit(metrics, '        "nucleus_size": nucleus.sum(-1),',
         '        "hellinger": hellinger(p_bn, p_gt),\n        "nucleus_size": nucleus.sum(-1),')
    edit(library / "core" / "labels.py", '"entropy_diff": "Entropy difference"}',
         '"entropy_diff": "Entropy difference", "hellinger": "Hellinger"}')
    planned = planned_rules(snakemake(run, "-n", "all", repo=copy, env=env).stdout)
    # and the findings, which read the tables the metrics jobs rewrite
    assert "oversmoothing_metrics" in planned
    running = rules_running("analysis.metrics", copy) | rules_running("core.labels", copy)  # the two modules edited
    assert planned <= running | {"all", "findings", "token_findings"}, planned
    assert not planned & {"train_model", "extract_logits", "sample", "sample_with_bat", "sample_direct", "token_head",
                          "evaluate_model"}
    # TBAT and sample quality only summarise with the statistics of `analysis.summary`: they run no metric's formula
    assert not planned & {"tbat", "quality", "unargmaxable", "table_b"}, planned
    config = repo_config("smoke.yaml")
    positions = metrics_path(bottleneck_models(config)[0], ground_truth_models(config)[0])
    snakemake(run, positions, repo=copy, env=env)
    frame = pq.read_table(run / positions, columns=["tv", "hellinger"]).to_pandas()
    assert frame["hellinger"].between(0, 1).all() and (frame["hellinger"] ** 2 <= frame["tv"] + 1e-12).all()
    summary = pd.read_csv(run / metrics_path(bottleneck_models(config)[0], ground_truth_models(config)[0], "summary"))
    assert "hellinger" in set(summary["metric"])


HALF_RULE = """

rule half_model:
    input:
        checkpoint=model_path("bn-{k}", "best.pt"),
    output:
        checkpoint=model_path("half-{k}", "best.pt"),
    wildcard_constraints:
        k=r"\\d+",
    params:
        **library_code("half_model"),
    log:
        log_path("svd", "half-{k}"),
    script:
        "../workflow/scripts/half_model.py"
"""

HALF_SCRIPT = """\"\"\"Snakemake adapter: bn-k with its logits halved (temperature 2).\"\"\"

import torch

from oversmooth.models.checkpoints import save_torch
from oversmooth.core.logs import log_to_file
from oversmooth.analysis.rank import HEAD_WEIGHT

smk = snakemake  # noqa: F821

with log_to_file(smk.log[0]):
    payload = torch.load(smk.input.checkpoint, map_location="cpu", weights_only=True)
    payload["model"][HEAD_WEIGHT] = payload["model"][HEAD_WEIGHT] / 2
    payload["name"] = "half-" + smk.wildcards.k
    save_torch(payload, smk.output.checkpoint)
"""


@pytest.mark.workflow
def test_the_add_a_model_kind_recipe_measures_the_new_kind(smoke_run, tmp_path):
    """docs/architecture.md's add-a-model-kind recipe on a copy of the repository and of the finished smoke run: a
    kind `half-<k>` (bn-k with its logits halved) in the grammar, a rule that makes it, its kind in the constraints
    of the rules that read it; its metrics then build from the smoke run's bn-k through logits, and the halved
    logits (a flatter distribution) leak more mass past the ground truth's nucleus than bn-k's."""
    from oversmooth.core.catalog import bottleneck_models, ground_truth_models
    from oversmooth.core.layout import metrics_path

    _, workdir, _ = smoke_run
    copy, env = repository_copy(tmp_path)
    run = tmp_path / "run"
    shutil.copytree(workdir, run, symlinks=True)
    edit(copy / "src" / "oversmooth" / "core" / "names.py", '    "human": r"human",',
         '    "half": r"half-\\d+",\n    "human": r"human",')
    # the kind in the constraints of the rules that read it: the global one (extract_logits) and the metrics'
    edit(copy / "rules" / "train.smk", '"mos", "svd", "ground_truth",', '"mos", "svd", "half", "ground_truth",')
    edit(copy / "rules" / "metrics.smk", '"mos", "svd", "token_head"),', '"mos", "svd", "half", "token_head"),')
    rank = copy / "rules" / "rank.smk"
    rank.write_text(rank.read_text() + HALF_RULE)
    (copy / "workflow" / "scripts" / "half_model.py").write_text(HALF_SCRIPT)
    config = repo_config("smoke.yaml")
    source, gt = bottleneck_models(config)[0], ground_truth_models(config)[0]
    half = source.replace("bn-", "half-")
    target = metrics_path(half, gt, "summary")
    planned = planned_rules(snakemake(run, "-n", target, repo=copy, env=env).stdout)
    assert planned == {"half_model", "extract_logits", "oversmoothing_metrics"}, planned
    snakemake(run, target, repo=copy, env=env)
    summaries = {m: pd.read_csv(run / metrics_path(m, gt, "summary")).set_index(["method", "metric"])["mean"]
                 for m in (source, half)}
    assert summaries[half][("pure", "tto")] > summaries[source][("pure", "tto")]
    assert summaries[half][("pure", "entropy_diff")] > summaries[source][("pure", "entropy_diff")]


@pytest.mark.workflow
def test_the_workflow_passes_snakemake_lint(repo):
    result = subprocess.run([str(SNAKEMAKE), "--lint"], cwd=repo, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_scripted_rule_carries_the_digest_of_its_own_script():
    """The library params must come from the same script as `script:`, or a library change would rerun the wrong rule."""
    for smk, rule, block, script in rule_blocks():
        assert script, f"{smk.name}: rule {rule} has no script"
        assert f'**library_code("{script}")' in block, f"{smk.name}: rule {rule}"


@pytest.mark.workflow
def test_one_table_from_a_clean_state_builds_only_what_it_needs(repo, tmp_path):
    result = snakemake(tmp_path, "-n", "results/tables/table_4_1.csv")
    assert planned_rules(result.stdout + result.stderr) == {
        "prepare_corpus", "select_prompts", "train_model", "extract_logits", "oversmoothing_metrics", "metrics_table",
        "tbat", "bat_decode",  # the demo measures BA-epsilon and BA-eta: their decoded rows feed the metrics
    }


@pytest.mark.workflow
@pytest.mark.parametrize("overlay", ["", "decoding:\n  bat_methods: []\ntokens:\n  sampling:\n    methods: [pure]\n"])
def test_each_byte_model_is_sampled_by_the_rule_of_its_methods(repo, tmp_path, overlay):
    """A byte model whose methods hold BAT sampling's is sampled by rule sample_with_bat, whose script runs the solver,
    any other by rule sample, whose script imports no BAT code: on the smoke config the bottlenecks and the nanogpt
    ground truth by the first, mos-4 and the SVD heads by the second; every model by the second without BAT methods."""
    override = tmp_path / "override.yaml"
    override.write_text(overlay or "{}\n")
    config = load_config(repo / "config" / "config.yaml", repo / "config" / "smoke.yaml", override)
    jobs = planned_jobs(snakemake(tmp_path / "run", "-n", "all", overrides=[override]).stdout)
    sampled = {wildcards.removeprefix("model="): rule for rule, wildcards in jobs
               if rule in ("sample", "sample_with_bat")}
    assert {"bn-4", "bn-64-s8", "gt-nanogpt", "mos-4", "svd-r4"} <= set(sampled), sampled
    assert all(rule == ("sample_with_bat" if byte_bat_methods(config, model) else "sample")
               for model, rule in sampled.items()), sampled
    assert (sampled["bn-4"] == "sample") == bool(overlay), sampled


@pytest.mark.workflow
@pytest.mark.parametrize("methods, parts", [
    ("[pure, top_p]", {"sample_direct"}),  # no BAT sampling: the join takes the direct samples alone
    ("[ba_eta]", {"sample_bat"}),  # BAT sampling alone: no direct job loads the source for no method
    ("[pure, ba_eta]", {"sample_direct", "sample_bat"}),
])
def test_a_token_head_s_samples_are_joined_from_the_jobs_its_methods_need(tmp_path, methods, parts):
    override = tmp_path / "methods.yaml"
    override.write_text(f"tokens:\n  sampling:\n    methods: {methods}\n")
    result = snakemake(tmp_path / "run", "-n", "results/samples/tok-full.parquet", overrides=[override])
    jobs = planned_jobs(result.stdout)
    upstream = {"prepare_corpus", "token_prompts", "convert_smollm2"}  # the token prompts are cut from the corpus
    assert {rule for rule, _ in jobs} - upstream == parts | {"join_samples"}


@pytest.mark.workflow
def test_tbat_of_a_trained_model_equals_the_definition_at_real_positions(smoke_run):
    import pyarrow.parquet as pq

    from oversmooth.analysis.bat.solver import BATSolver
    from oversmooth.analysis.reference import bat_reject_set
    from oversmooth.extraction.logit_tables import read_sampled_rows
    from oversmooth.models.checkpoints import load_model

    _, workdir, _ = smoke_run
    results = workdir / "results"
    W = load_model(results / "models" / "bn-4" / "best.pt").output_matrix().detach().double().numpy()
    tbat = pq.read_table(results / "tbat" / "bn-4.parquet").to_pandas()
    pure = tbat[tbat["method"] == "pure"].reset_index(drop=True)
    rows = [int(r.prompt_id) * 64 + int(r.position) for r in pure.head(3).itertuples()]
    _, _, logprobs = read_sampled_rows(results / "logits" / "bn-4.parquet", np.array(rows))
    solver = BATSolver(W)
    for i, lp in enumerate(logprobs):
        p = np.exp(lp.astype(np.float64))
        p /= p.sum()
        expected, failures = bat_reject_set(p, W)
        assert not failures
        assert np.array_equal(solver.reject_set(p).rejected, expected)
        assert pure.loc[i, "tbat"] == pytest.approx(p[expected].sum(), abs=1e-9)


@pytest.mark.workflow
def test_the_bottlenecks_ba_metrics_are_the_decoded_rows_at_tbats_positions_and_tbat_follows_ba(smoke_run):
    """config/smoke.yaml: bat_methods [ba_epsilon, ba_eta], metrics.bat_positions = tbat.positions = 24."""
    from oversmooth.analysis.decodedrows import read_decoded_rows
    from oversmooth.analysis.metrics import METRICS, oversmoothing_against, reference_terms
    from oversmooth.extraction.logit_tables import sampled_logit_rows

    _, workdir, _ = smoke_run
    results = workdir / "results"
    truth = sampled_logit_rows(results / "logits" / "gt-nanogpt.parquet", 24, 7)  # the smoke's seed
    reference = reference_terms(truth.logprobs.astype(np.float64), 0.9)
    for model in ("bn-4", "bn-64", "bn-4-s8"):
        decoded = read_decoded_rows(results / "decoded" / f"{model}.parquet")
        tbat = pq.read_table(results / "tbat" / f"{model}.parquet").to_pandas()
        metrics = pq.read_table(results / "metrics" / f"{model}__gt-nanogpt.parquet").to_pandas()
        summary = pd.read_csv(results / "metrics" / f"{model}__gt-nanogpt.summary.csv")
        for method in ("ba_epsilon", "ba_eta"):
            rows = decoded.method == method
            assert (decoded.prompt_id[rows] == truth.prompt_id).all() and (decoded.position[rows] == truth.position).all()
            after = tbat[tbat["method"] == method]  # TBAT after BA, at the decoded rows (TBAT's own positions here)
            assert len(after) == 24 and not after["failed"].any() and after["tbat"].between(0, 1 + 1e-9).all(), model
            assert (after["position"].to_numpy() == decoded.position[rows]).all(), model
            got = metrics[metrics["method"] == method].sort_values(["prompt_id", "position"])
            assert len(got) == 24 and (got["position"].to_numpy() == truth.position).all(), model
            expected = oversmoothing_against(decoded.logprobs[rows], reference, 1e-6)
            for name in METRICS:
                np.testing.assert_allclose(got[name].to_numpy(), expected[name], rtol=1e-12, atol=1e-15,
                                           err_msg=f"{model} {method} {name}")
            counted = summary.loc[summary["method"] == method, ["n_positions", "n_infinite"]].sum(1)  # KL: finite ones
            assert set(counted) == {24}, (model, method)
        counted = summary.loc[summary["method"] == "pure", ["n_positions", "n_infinite"]].sum(1)
        assert set(counted) == {8 * 64}  # every position
    # no BA for a mixture, an SVD head or a checkpoint along training (their metrics and TBAT, no decoded rows)
    assert not list((results / "decoded").glob("*@*")) and not list((results / "decoded").glob("mos-*"))
    along = pq.read_table(results / "metrics" / "bn-4@10__gt-nanogpt.parquet").to_pandas()
    assert not along["method"].str.startswith("ba_").any()


@pytest.mark.workflow
def test_changing_a_tbat_setting_reruns_tbat_and_its_tables_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "tbat:\n  threshold: 0.3\n")
    assert planned_rules(output) == {"tbat", "metrics_table", "time_metrics", "table_i_1", "loss_matched",
                                     "figure_loss_matched", "findings", "token_findings", "figure_token_bottleneck",
                                     "all"}
    assert "table=table_4_2" not in output and "table=table_e_7" in output


@pytest.mark.workflow
def test_ba_settings_rerun_only_the_jobs_that_decode_or_sample_with_bat(smoke_run, tmp_path):
    # BA's positions: its decoded rows and the metrics of the models that have them, no other model's metrics
    jobs = planned_jobs(dry_run_with_override(smoke_run, tmp_path, "metrics:\n  bat_positions: 7\n"))
    decoded = {w for r, w in jobs if r == "bat_decode"}
    metrics = {w.split(",")[0] for r, w in jobs if r == "oversmoothing_metrics"}
    assert decoded and metrics == decoded, (decoded, metrics)
    # the solver's tolerances: BA sampling too (the byte models with a head matrix, the token heads' BA jobs)
    # and the joins of a token head's samples, not its other methods' samples (a GPU job at thesis scale)
    jobs = planned_jobs(dry_run_with_override(smoke_run, tmp_path, "tbat:\n  zero_tol: 2.0e-9\n"))
    assert {"bat_decode", "sample_with_bat", "sample_bat", "join_samples"} <= {r for r, _ in jobs}
    assert ("sample_with_bat", "model=bn-4") in jobs and not {"sample", "sample_direct"} & {r for r, _ in jobs}
    # a token-track method list that BA sampling's jobs do not run
    jobs = planned_jobs(dry_run_with_override(smoke_run, tmp_path, "tokens:\n  sampling:\n    methods: "
                                                                "[pure, top_p, ba_eta, mirostat, top_k]\n"))
    assert {"sample_direct", "join_samples"} <= {r for r, _ in jobs} and "sample_bat" not in {r for r, _ in jobs}


@pytest.mark.workflow
def test_smoke_run_writes_tables_b_and_i_1(smoke_run):
    _, workdir, _ = smoke_run
    tables = workdir / "results" / "tables"
    table_b = pd.read_csv(tables / "table_b.csv").fillna("")
    assert table_b["model"].tolist() == BOTTLENECK_ROWS
    table_b = table_b[table_b["model"].isin(RUNS)]
    assert (table_b["n_unargmaxable"] <= table_b["n_flagged_approx"]).all() and (table_b["n_failed"] == 0).all()
    assert (table_b["n_unargmaxable"] == table_b["unargmaxable"].str.split().str.len().fillna(0)).all()
    table_i = pd.read_csv(tables / "table_i_1.csv")
    for metric in ("TTO", "NSMD", "TV", "KL", "TBAT"):
        assert (table_i[f"{metric} ours mean s"] > 0).all() and (table_i[f"{metric} reference mean s"] > 0).all()


@pytest.mark.workflow
def test_smoke_run_samples_and_scores_quality(smoke_run):
    from oversmooth.generation.sampletable import SAMPLES_SCHEMA

    _, workdir, _ = smoke_run
    results = workdir / "results"
    samples = pq.read_table(results / "samples" / "bn-4.parquet")
    assert samples.schema.equals(SAMPLES_SCHEMA) and samples.num_rows == 4 * 12  # 4 prompts; decoding.methods, BA, mirostat
    assert {len(c) for c in samples.column("continuation").to_pylist()} == {64}
    table = pd.read_csv(results / "tables" / "table_5_3.csv")
    assert table["model"].tolist() == [*BOTTLENECK_ROWS, "mos-4", "gt-nanogpt", "human"]
    runs = table[~table["model"].isin(SEED_ROWS)]
    assert (runs["perplexity_mean"] > 1).all() and table["byte_tv"].iloc[-1] == 0.0
    assert len(pd.read_csv(results / "tables" / "table_6_2.csv")) == (len(BOTTLENECK_ROWS) + 2) * 3 + 1
    truncation = pd.read_csv(results / "tables" / "table_truncation_quality.csv")
    assert list(dict.fromkeys(truncation["method"])) == ["Epsilon", "Eta", "Typical", "Min-P", "BA-Epsilon", "BA-Eta",
                                                         "Mirostat", "Human"]
    assert set(truncation.loc[truncation["model"] == "mos-4", "method"]) == {"Epsilon", "Eta", "Typical", "Min-P",
                                                                              "Mirostat"}  # no BA: no head matrix
    appendix_g = (results / "tables" / "samples_appendix_g.md").read_text()  # every model, every method it samples
    assert "| bn-4 | BA-Eta |" in appendix_g and "| mos-4 | Min-P |" in appendix_g and "| mos-4 | BA-" not in appendix_g
    assert "**" in (results / "tables" / "table_5_1.md").read_text()
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_5_1.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_a_quality_setting_reruns_quality_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "quality:\n  repetition_n: 3\n")
    assert planned_rules(output) == {"quality", "quality_table", "figure_token_quality", "findings", "all"}


@pytest.mark.workflow
def test_report_captions_every_table_and_figure_with_its_thesis_counterpart(smoke_run):
    _, workdir, _ = smoke_run
    snakemake(workdir, "--report", "results/report.html", timeout=300)
    html = (workdir / "results" / "report.html").read_text()
    assert f"Built by oversmooth {oversmooth.__version__}" in html  # the version that built it
    shown = [
        "Table 3.1", "Figure 3.1", "Table 4.1", "Table 4.2", "Table 6.1", "Table E.1", "Table E.2", "Table E.7",
        "Table E.8", "Table F.1", "Figure 4.1", "Figure 4.2", "Figure 4.3", "Table B", "Table I.1", "Table 5.3",
        "Table 6.2", "Table 6.3", "Table 5.1", "Table 5.2", "Appendix G", "Figure 5.1", "Table 7.1", "Table 7.2",
        "Table 7.3", "Table H.1", "Figure 7.1", "Table 4.1, token track", "Table F.1, token track",
        "Table 5.3, token track", "Table 6.3, token track", "Table 5.1, token track", "Table 5.2, token track",
        "Table B, token track",
    ]
    assert "Rank of the contextual distribution</strong> (Godey" in html
    assert "Anisotropy per layer</strong> (Godey" in html
    assert "Learned vs imposed rank constraints</strong> (Godey" in html
    assert "Singular entropy of the head during training</strong> (Godey" in html
    assert "Rank-k heads on a pretrained LM</strong> (thesis" in html
    assert "Sample quality of rank-k heads on a pretrained LM</strong> (thesis" in html
    for name in shown:
        assert f"{name}</strong> (thesis" in html, f"{name} has no caption in the report"
    assert "This run: bottlenecks 4, 64" in html  # the global description, rendered with the run's config
    assert "{{" not in html.split("<script>")[0]


@pytest.mark.workflow
def test_smoke_run_writes_the_svd_and_effective_rank_tables(smoke_run):
    _, workdir, _ = smoke_run
    results = workdir / "results"
    for name in ("table_7_1", "table_7_2"):
        assert pd.read_csv(results / "tables" / f"{name}.csv")["model"].tolist() == ["svd-r4", "svd-r16"]
    table_7_1 = pd.read_csv(results / "tables" / "table_7_1.csv")
    assert (table_7_1["TTO mean (gt-nanogpt)"] >= table_7_1["NSMD mean (gt-nanogpt)"]).all()
    assert pd.read_csv(results / "tables" / "table_h_1.csv")["model"].tolist() == ["svd-r4", "svd-r16", "human"]
    samples = pq.read_table(results / "samples" / "svd-r4.parquet")
    assert set(samples.column("method").to_pylist()) == {"pure"}  # svd.decoding
    record = json.loads((results / "models" / "svd-r4" / "svd.json").read_text())
    assert record["source"].endswith("bn-64/best.pt") and 0 < record["energy_kept"] < 1
    ranks = pd.read_csv(results / "tables" / "table_7_3.csv").set_index("model")
    assert list(ranks.index) == [*BOTTLENECK_ROWS, "gt-nanogpt"] and (ranks.loc[RUNS, "positions"] == 32).all()
    assert ranks.loc["bn-4", "Logits threshold rank"] <= 4 and ranks.loc["bn-4", "Post-bottleneck effective rank"] <= 4
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_7_1.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_adding_an_svd_rank_builds_that_model_only_and_a_rank_setting_reruns_table_7_3(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "svd:\n  ranks: [4, 8, 16]\n")
    assert planned_rules(output) == {
        "svd_model", "extract_logits", "sample", "oversmoothing_metrics", "position_figure", "quality",
        "metrics_table", "quality_table", "rank_constrained_head", "figure_godey_rank_loss", "findings", "all",
    }
    assert "wildcards: rank=8" in output and "rank=4" not in output and "train_model" not in output
    output = dry_run_with_override(smoke_run, tmp_path, "rank:\n  threshold: 0.05\n")
    assert planned_rules(output) == {"effective_rank", "table_7_3", "ngram_rank", "all"}


@pytest.mark.workflow
def test_smoke_run_writes_godey_ngram_rank_and_anisotropy(smoke_run):
    _, workdir, _ = smoke_run
    tables = workdir / "results" / "tables"
    ngram = pd.read_csv(tables / "table_godey_ngram_rank.csv")
    assert ngram["n"].tolist() == [2, 3, 4, 5]
    assert ((ngram["effective_rank"] >= 1) & (ngram["energy_rank_0.9"] <= ngram["energy_rank_0.99"])).all()
    assert (ngram["contexts"] <= 4096).all() and ngram["context_coverage"].between(0, 1, inclusive="right").all()
    anisotropy = pd.read_csv(tables / "table_godey_anisotropy.csv")
    anisotropy = anisotropy[~anisotropy["model"].isin(SEED_ROWS)]
    per_model = anisotropy.groupby("model")["representation"].apply(list)
    assert per_model["bn-4"] == ["embeddings", "block_1", "pre_bottleneck", "post_bottleneck"]
    assert per_model["gt-nanogpt"][:3] == ["embeddings", "block_1", "block_2"]
    assert anisotropy["anisotropy"].between(-1, 1).all() and (anisotropy["vectors"] == 32).all()
    log = pd.read_csv(workdir / "results" / "models" / "bn-4" / "train_log.csv")
    assert log["head_singular_entropy_gap"].between(0, np.log(4)).all()
    for ext in ("png", "pdf"):
        assert (workdir / "results" / "figures" / f"figure_godey_singular_entropy.{ext}").stat().st_size > 1000
    heads = pd.read_csv(tables / "table_godey_rank_constrained.csv")
    assert heads["rank"].tolist() == [4, 16]
    assert heads["from_scratch_loss"].notna().tolist() == [True, False]  # bn-4 exists, bn-16 does not
    assert (heads["learned_head_loss"] < 5.6).all() and heads[["svd_imposed_loss", "source_loss"]].notna().all().all()
    for ext in ("png", "pdf"):
        assert (workdir / "results" / "figures" / f"figure_godey_rank_loss.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_jobs_ask_the_scheduler_for_what_config_resources_say(smoke_run, tmp_path):
    _, workdir, _ = smoke_run
    override = tmp_path / "cluster.yaml"
    override.write_text(
        "resources:\n  train_gpus: 2\n  gpu_partition: big-gpu\n  cpu_partition: small\n  gpu_model: a100\n"
        "  account: lab-7\n  mem_mb: {train: 12000, head: 5000, cpu: 3000}\n  runtime_min: {train: 600, head: 45, cpu: 30}\n"
        "  inference_gpus: 1\n"
    )
    output = snakemake(workdir, "-n", "-f", "results/models/bn-4/best.pt", "results/tbat/bn-4.parquet",
                       "results/models/bn-4@10/best.pt", "results/models/tok-learned-r4/head.pt",
                       "results/samples/tok-full.ba_eta.parquet", overrides=[override])
    text = output.stdout + output.stderr

    def job(rule):
        block = text[text.index(f"rule {rule}:"):]
        return block[:block.index("\n\n")]

    for expected in ("gpu=2", "slurm_partition=big-gpu", "runtime=600", "gpu_model=a100", "slurm_account=lab-7",
                     "mem_mb=12000"):
        assert expected in job("train_model"), f"{expected} not in\n{job('train_model')}"
    tbat = job("tbat")
    assert "gpu=0" in tbat and "slurm_partition=small" in tbat and "mem_mb=3000" in tbat and "gpu_model" not in tbat
    # a checkpoint is a CPU job of minutes, not a job on the default partition with no limit
    checkpoint = job("checkpoint_model")
    assert "slurm_partition=small" in checkpoint and "runtime=" in checkpoint and "mem_mb=3000" in checkpoint
    # fitting a head on a frozen model takes a GPU for minutes, not the training's hours
    head = job("token_head")
    assert "gpu=2" in head and "runtime=45" in head and "mem_mb=5000" in head
    # BAT sampling on a token head: its solver on a CPU node, not a sample job holding a GPU; its runtime the larger
    # of runtime_min.cpu and 1.5 x its estimate (8 prompts x 8 tokens x 0.32 s at the full head: seconds)
    bat = job("sample_bat")
    assert "gpu=0" in bat and "slurm_partition=small" in bat and "runtime=30" in bat and "method=ba_eta" in bat


@pytest.mark.workflow
def test_the_mos_member_is_trained_measured_and_sampled_like_the_family(smoke_run):
    from oversmooth.models.checkpoints import load_model

    _, workdir, _ = smoke_run
    results = workdir / "results"
    model = load_model(results / "models" / "mos-4" / "best.pt")
    assert model.config.mos_components == 2 and model.config.bottleneck == 4
    hidden = pq.read_table(results / "logits" / "mos-4.hidden.parquet")
    assert hidden.schema.field("post").type.list_size == 2 * 4  # the K component inputs
    for name in ("table_4_2", "table_6_1", "table_e_1", "table_f_1", "table_5_3"):
        assert "mos-4" in pd.read_csv(results / "tables" / f"{name}.csv")["model"].tolist(), name
    assert "mos-4" not in pd.read_csv(results / "tables" / "table_e_7.csv")["model"].tolist()
    assert "mos-4" not in pd.read_csv(results / "tables" / "table_7_3.csv")["model"].tolist()
    logprobs = pq.read_table(results / "logits" / "mos-4.parquet").slice(0, 5).column("logprobs").to_pylist()
    assert np.allclose(np.exp(np.array(logprobs, dtype=np.float64)).sum(axis=1), 1.0, atol=1e-4)


@pytest.mark.workflow
def test_a_token_level_ground_truth_flows_into_evaluation_and_the_oversmoothing_tables(smoke_run, tiny_token_lm, tmp_path):
    """A `token` ground truth named by path (a saved transformers model) beside the smoke run's nanogpt one."""
    _, workdir, _ = smoke_run
    override = tmp_path / "token_gt.yaml"
    override.write_text(
        "ground_truths:\n"
        "  - {name: nanogpt, kind: nanogpt, model: {n_layer: 2}, train: {max_iters: 40}}\n"
        f"  - {{name: tiny, kind: token, path: '{tiny_token_lm}', beam: 2, prune_ratio: 0.001}}\n"
    )
    targets = ("results/tables/table_4_1.csv", "results/eval/gt-tiny.json")
    planned = snakemake(workdir, "-n", *targets, overrides=[override])
    assert planned_rules(planned.stdout + planned.stderr) == {
        "extract_logits", "oversmoothing_metrics", "metrics_table", "evaluate_model",
    }  # no training: the nanogpt entry is the smoke config's own
    snakemake(workdir, *targets, overrides=[override])
    table = pd.read_csv(workdir / "results" / "tables" / "table_4_1.csv")
    assert table["model"].tolist() == [*BOTTLENECK_ROWS, "mos-4"]
    table = table[~table["model"].isin(SEED_ROWS)]
    for gt in ("gt-nanogpt", "gt-tiny"):  # one column set per ground truth
        assert table[f"TTO mean ({gt})"].between(0, 1).all() and table[f"NSMD mean ({gt})"].notna().all()
    logits = pq.read_table(workdir / "results" / "logits" / "gt-tiny.parquet")
    assert logits.num_rows == 8 * 64
    probs = np.exp(np.array(logits.column("logprobs").to_pylist()[:32], dtype=np.float64))
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-4)
    evaluation = json.loads((workdir / "results" / "eval" / "gt-tiny.json").read_text())
    assert evaluation["bytes"] > 0 and np.isfinite(evaluation["heldout_loss"])
    assert evaluation["token_level_loss"] >= evaluation["heldout_loss"] - 0.05  # its own tokenisation among all
    assert "job stopped" not in (workdir / "results" / "logs" / "logits" / "gt-tiny.log").read_text()


@pytest.mark.workflow
def test_smoke_run_analyses_the_family_along_training(smoke_run):
    _, workdir, _ = smoke_run
    results = workdir / "results"
    for model in ("bn-4", "bn-64"):
        for iteration in (0, 10):
            checkpoint = torch.load(results / "models" / f"{model}@{iteration}" / "best.pt", weights_only=True)
            kept = torch.load(results / "models" / model / "kept" / f"{iteration}.pt", weights_only=True)
            assert checkpoint["iteration"] == iteration and checkpoint["name"] == f"{model}@{iteration}"
            assert all(torch.equal(checkpoint["model"][k], kept["model"][k]) for k in kept["model"])
            assert (results / "tbat" / f"{model}@{iteration}.summary.csv").exists()
            assert (results / "metrics" / f"{model}@{iteration}__gt-nanogpt.summary.csv").exists()
    table = pd.read_csv(results / "tables" / "table_loss_matched.csv")
    assert list(table.columns) == ["ground_truth", "method", "metric", "val_loss", "bn-4", "bn-64", "n_bottlenecks",
                                   "spearman_k", "bn-4 ci_low", "bn-4 ci_high", "bn-64 ci_low", "bn-64 ci_high"]
    assert set(table["metric"]) == {"TTO", "NSMD", "TBAT"} and set(table["ground_truth"]) == {"gt-nanogpt", "-"}
    shared = table[table["n_bottlenecks"] == 2]  # losses both runs passed through (between 0 and 10 for bn-64)
    assert len(shared) and shared[["bn-4", "bn-64"]].notna().all().all()
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_loss_matched.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_removing_checkpoints_retrains_nothing_and_adding_one_builds_only_its_jobs(smoke_run, tmp_path):
    # (an earlier test may have left a table built for another config: compare with what runs without the change)
    _, workdir, _ = smoke_run
    unchanged = planned_rules(snakemake(workdir, "-n", "all").stdout)
    output = dry_run_with_override(smoke_run, tmp_path, "checkpoints:\n  iterations: []\n")
    assert planned_rules(output) - unchanged <= {"all", "findings"}  # the findings drop the loss-matched test
    output = dry_run_with_override(smoke_run, tmp_path, "checkpoints:\n  iterations: [0, 10, 20]\n")
    planned = planned_rules(output)
    assert planned - unchanged - {"all", "findings"} == {
        "checkpoint_model", "extract_logits", "oversmoothing_metrics", "tbat", "loss_matched", "figure_loss_matched",
    }
    assert "findings" in planned  # it reads the loss-matched table
    assert "wildcards: model=bn-4@20" in output and "train_model" not in output
    assert "wildcards: model=bn-4@10\n" not in output and "wildcards: model=bn-4@10," not in output



@pytest.mark.workflow
def test_every_table_with_bottleneck_rows_gains_each_k_s_across_seed_mean_and_sd(smoke_run):
    from oversmooth.reporting.seeds import combined_interval

    _, workdir, _ = smoke_run
    tables = workdir / "results" / "tables"
    for name in ("table_3_1", "table_4_1", "table_4_2", "table_6_1", "table_e_1", "table_e_7", "table_f_1",
                 "table_b", "table_5_3", "table_6_2", "table_7_3", "table_godey_anisotropy"):
        models = set(pd.read_csv(tables / f"{name}.csv")["model"])
        assert {"bn-4-s8", "bn-64-s8", *SEED_ROWS} <= models, name
    table = pd.read_csv(tables / "table_3_1.csv").set_index("model")
    runs = table.loc[["bn-4", "bn-4-s8"], "heldout_loss"]
    assert runs.iloc[0] != runs.iloc[1]  # another seed, another run
    assert table.loc["bn-4 (2 seeds: mean)", "heldout_loss"] == pytest.approx(runs.mean(), rel=1e-5)  # 6 digits
    assert table.loc["bn-4 (2 seeds: sd)", "heldout_loss"] == pytest.approx(runs.std(), rel=1e-5)
    table = pd.read_csv(tables / "table_4_1.csv").set_index("model")
    runs = table.loc[["bn-64", "bn-64-s8"]]
    stat = "TTO {} (gt-nanogpt)"
    expected = combined_interval(*(runs[stat.format(s)].to_numpy() for s in ("mean", "ci_low", "ci_high")))
    row = table.loc["bn-64 (2 seeds: mean)"]
    assert (row[stat.format("ci_low")], row[stat.format("ci_high")]) == pytest.approx(expected, rel=1e-5)
    assert row["bottleneck"] == 64 and row[stat.format("mean")] == pytest.approx(runs[stat.format("mean")].mean(),
                                                                                 rel=1e-5)


@pytest.mark.workflow
def test_adding_a_seed_builds_only_its_runs_and_the_tables_and_removing_it_retrains_nothing(smoke_run, tmp_path):
    _, workdir, _ = smoke_run
    unchanged = planned_rules(snakemake(workdir, "-n", "all").stdout)
    _, model_jobs, output = new_jobs(smoke_run, tmp_path, "train:\n  seeds: [8, 9]\n")
    assert ("train_model", "model=bn-4-s9") in model_jobs and ("train_model", "model=bn-64-s9") in model_jobs
    assert all("-s9" in wildcards for _, wildcards in model_jobs), model_jobs
    assert {"table_3_1", "metrics_table", "quality_table", "table_b"} <= planned_rules(output)
    output = dry_run_with_override(smoke_run, tmp_path, "train:\n  seeds: []\n")
    assert all(rule in report_rules() or rule in unchanged for rule, _ in planned_jobs(output))


TOKEN_HEADS = ["tok-svd-r4", "tok-learned-r4", "tok-svd-r64", "tok-learned-r64"]  # config/smoke.yaml: tokens
NEW_HEADS = ("tok-svd-r16", "tok-learned-r16")  # what `tokens.ranks: [4, 16, 64]` adds


@pytest.mark.workflow
def test_the_token_track_measures_each_rank_k_head_against_the_full_head_in_the_byte_track_s_tables(smoke_run):
    _, workdir, _ = smoke_run
    results = workdir / "results"
    states = pq.read_table(results / "tokens" / "eval.states.parquet")
    assert states.schema.field("state").type.list_size == 576  # SmolLM2-135M's hidden size
    positions = pq.read_table(results / "metrics" / "tok-svd-r4__tok-full.parquet").to_pandas()
    assert len(positions) == len(states) * 9 and positions["target"].max() > 255  # tokens, not bytes; 9 methods
    for name in ("table_4_1", "table_4_2", "table_6_1", "table_f_1"):
        table = pd.read_csv(results / "tables" / f"{name}_tokens.csv")
        assert table["model"].unique().tolist() == TOKEN_HEADS, name
    table = pd.read_csv(results / "tables" / "table_4_1_tokens.csv").set_index("model")
    tto = table["TTO mean (tok-full)"]
    assert tto["tok-svd-r4"] > tto["tok-svd-r64"] > 0
    tbat = table["TBAT mean"]  # config/smoke.yaml: TBAT at tbat_ranks [4] only
    assert tbat[["tok-svd-r4", "tok-learned-r4"]].between(0, 1).all() and tbat[["tok-svd-r64", "tok-learned-r64"]].isna().all()
    assert (table["positions"] == len(states)).all()
    assert len(pq.read_table(results / "tokens" / "train.states.parquet")) == 2048
    assert (results / "figures" / "figure_token_heads.png").stat().st_size > 10_000


@pytest.mark.workflow
def test_the_token_track_s_tbat_over_the_whole_vocabulary_equals_the_definition_on_sampled_tokens(smoke_run):
    """The TBAT job's rows are a seeded sample of the evaluation states; at one of them (pure sampling) the solver's
    reject set over 49,152 tokens agrees with one linprog per token on every accepted token and 10 rejected ones."""
    from oversmooth.analysis.bat.solver import BATSolver
    from oversmooth.analysis.reference import bat_reject_set
    from oversmooth.analysis.tokenheads import head_matrix, load_head, sampled_state_rows

    _, workdir, _ = smoke_run
    results = workdir / "results"
    assert pd.read_csv(results / "tables" / "table_e_7_tokens.csv")["model"].tolist() == ["tok-svd-r4", "tok-learned-r4"]
    tbat = pq.read_table(results / "tbat" / "tok-learned-r4.parquet").to_pandas()
    assert len(tbat) == 2 * 9 and not tbat["failed"].any()  # config/smoke.yaml: tokens.tbat_positions 2, 9 methods
    head = load_head(results / "models" / "tok-learned-r4" / "head.pt")[0]
    rows = sampled_state_rows(head, results / "tokens" / "eval.states.parquet", 2, seed=7)  # smoke.yaml's seed
    pure = tbat[tbat["method"] == "pure"]
    assert pure["position"].tolist() == rows.position.tolist() and pure["prompt_id"].tolist() == rows.prompt_id.tolist()
    W, p = head_matrix(head), np.exp(rows.logprobs[0])
    result = BATSolver(W).reject_set(p / p.sum())
    assert not result.failed and pure["tbat"].iloc[0] == pytest.approx(result.tbat(p / p.sum()), abs=1e-12)
    candidates = np.flatnonzero(result.rejected & (p > 1e-9))
    chosen = np.concatenate([np.flatnonzero(~result.rejected), np.random.default_rng(0).choice(candidates, 10, replace=False)])
    expected, failures = bat_reject_set(p / p.sum(), W, tokens=chosen)
    assert not failures and np.array_equal(expected[chosen], result.rejected[chosen])


@pytest.mark.workflow
@pytest.mark.reads_smoke_run
def test_the_full_heads_reject_set_at_a_real_position_is_the_definitions(smoke_run):
    """SmolLM2's own head (49,152 x 576) at an evaluation state, pure sampling: the solver's answers on its two
    least probable accepted tokens (p <= 0.2) and its two most probable rejected ones are the definition's (its LP
    over every token, each answer proved by a point of P or a dual bound)."""
    from oversmooth.analysis.bat.polytope import row_basis
    from oversmooth.analysis.bat.settings import TBATSettings
    from oversmooth.analysis.bat.solver import BATSolver
    from oversmooth.analysis.tokenheads import output_weight, sampled_state_rows
    from oversmooth.models.causallm import load_causal_lm

    results = smoke_run[1] / "results"
    head = output_weight(load_causal_lm(results / "data" / "smollm2")[0])
    W = head.double().numpy()
    logprobs = sampled_state_rows(head, results / "tokens" / "eval.states.parquet", 1, seed=7).logprobs[0]
    p = np.exp(logprobs) / np.exp(logprobs).sum()
    Q = row_basis(W, TBATSettings().rank_tol)
    result = BATSolver(W, basis=Q).reject_set(p)
    assert W.shape == (49152, 576) and not result.failed and result.stats["polished"] > 0  # every step ran
    accepted = np.flatnonzero(~result.rejected & (p <= 0.2))
    rejected = np.flatnonzero(result.rejected)
    for i in accepted[np.argsort(p[accepted])[:2]]:
        assert min_q_i_by_interior_point(Q, p, i)[1] > 1e-9  # min q_i above zero_tol: accepted
    for i in rejected[np.argsort(-p[rejected])[:2]]:
        assert p[i] > 1e-5 and min_q_i_by_interior_point(Q, p, i)[0] <= 1e-9  # a point with q_i = 0: rejected


@pytest.mark.workflow
def test_adding_a_token_rank_builds_only_its_heads_their_metrics_samples_and_the_tables(smoke_run, tmp_path):
    """The new heads are fitted, measured, sampled and scored; no other head, sample or quality job reruns."""
    _, model_jobs, output = new_jobs(smoke_run, tmp_path, "tokens:\n  ranks: [4, 16, 64]\n")
    jobs = planned_jobs(output)  # the report rules may be pending already: looked up in the whole plan
    assert set(model_jobs) == {
        (rule, f"model={head}") for rule in ("token_head", "sample_direct", "join_samples", "quality")
        for head in NEW_HEADS
    } | {("oversmoothing_metrics", f"model={head}, gt=tok-full") for head in NEW_HEADS} | {
        ("sample_bat", f"model={head}, method=ba_eta") for head in NEW_HEADS}  # BA-eta in a CPU job of its own
    assert {wildcards for rule, wildcards in jobs if rule == "metrics_table"} >= {
        f"table={name}_tokens" for name in ("table_4_1", "table_4_2", "table_6_1", "table_f_1")}
    assert {wildcards for rule, wildcards in jobs if rule == "quality_table"} >= {
        f"quality_table={name}_tokens" for name in ("table_5_3", "table_6_2", "table_6_3")}
    assert ("figure_token_heads", "") in jobs and ("figure_token_quality", "") in jobs
    output = dry_run_with_override(smoke_run, tmp_path, "tokens:\n  fit_iters: 11\n")
    assert {w for r, w in planned_jobs(output) if r == "token_head"} == {"model=tok-learned-r4", "model=tok-learned-r64"}


@pytest.mark.workflow
def test_the_token_track_samples_every_head_and_the_full_head_and_scores_them_against_human_text(smoke_run):
    from oversmooth.generation.sampletable import SAMPLES_SCHEMA
    from oversmooth.models.causallm import load_tokenizer

    _, workdir, _ = smoke_run
    results = workdir / "results"
    prompts = pq.read_table(results / "tokens" / "prompts.parquet").to_pandas()
    assert len(prompts) == 8 and {len(p) for p in prompts["prefix_ids"]} == {8}  # config/smoke.yaml: tokens.sampling
    tokenizer = load_tokenizer(results / "data" / "smollm2")
    for model in [*TOKEN_HEADS, "tok-full"]:
        samples = pq.read_table(results / "samples" / f"{model}.parquet")
        assert samples.schema.equals(SAMPLES_SCHEMA) and samples.num_rows == 8 * 4, model  # pure, top_p, ba_eta, mirostat
        for row in samples.to_pylist()[:3]:
            ids = tokenizer(row["text"], add_special_tokens=False)["input_ids"]
            assert 1 <= len(ids) <= 16, row  # 8 sampled tokens (their text may tokenise differently)
    table = pd.read_csv(results / "tables" / "table_5_3_tokens.csv")
    assert table["model"].tolist() == [*TOKEN_HEADS, "tok-full", "human"]
    assert table.loc[table["model"] != "human", "n_samples"].eq(8).all()
    assert {"mauve_ci_low", "mauve_ci_high", "mauve_replicates"} <= set(table.columns)
    assert (table["perplexity_mean"] > 1).all()
    # each table keeps its methods that the track samples with (smoke: pure and top-p)
    assert set(pd.read_csv(results / "tables" / "table_6_3_tokens.csv")["method"]) == {"Top-P", "Human"}
    assert set(pd.read_csv(results / "tables" / "table_6_2_tokens.csv")["method"]) == {"Pure", "Human"}
    md = (results / "tables" / "table_5_1_tokens.md").read_text()
    assert "token track" in md and "| tok-full | Pure |" in md and "| tok-svd-r4 | Pure |" in md
    assert (results / "figures" / "figure_token_quality.png").stat().st_size > 10_000


@pytest.mark.workflow
def test_the_token_track_counts_each_analysed_head_s_unargmaxable_tokens(smoke_run):
    _, workdir, _ = smoke_run
    results = workdir / "results"
    table = pd.read_csv(results / "tables" / "table_b_tokens.csv").set_index("model")
    assert table.index.tolist() == ["tok-svd-r4", "tok-learned-r4"]  # config/smoke.yaml: unargmaxable_ranks [4]
    assert (table["vocabulary"] == 49152).all() and (table["n_failed"] == 0).all()
    assert (table["n_argmaxable"] + table["n_unargmaxable"] == 49152).all()
    assert (table["n_unargmaxable"] > 40_000).all()  # four dimensions: few hull vertices among 49,152 rows
    assert ((table["corpus_share_never_argmax"] > 0) & (table["corpus_share_never_argmax"] < 1)).all()
    record = json.loads((results / "unargmaxable" / "tok-svd-r4.json").read_text())
    assert len(record["argmaxable"]) == table.loc["tok-svd-r4", "n_argmaxable"] and record["max_margin"] <= 1e-6


@pytest.mark.workflow
def test_the_bytes_prompts_skip_by_default_are_those_smollm2_cannot_spell(smoke_run, repo):
    """SmolLM2 (the demo's and thesis config's token-level ground truth) has no token starting with 21 bytes: the
    default `eval.unspellable_bytes` is exactly that set, read here from its real tokenizer."""
    from oversmooth.models.tokenmarginal import unspellable_bytes
    from oversmooth.workflow.config import load_config

    _, workdir, _ = smoke_run
    found = unspellable_bytes("gt-smollm2", workdir / "results" / "data" / "smollm2")
    assert found == load_config(repo / "config" / "config.yaml")["eval"]["unspellable_bytes"]
    assert len(found) == 21 and {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xF1, 0xF2} <= set(found)


@pytest.mark.workflow
def test_following_the_corrupt_file_message_rebuilds_the_file_alone_and_the_run_then_the_job_that_failed(smoke_run,
                                                                                                        tmp_path):
    """A truncated logits file: the reading job fails naming a command; that command, typed as printed in the folder
    it names (the repository: the run's own folder, cores and config file are in it), rebuilds the file alone, and the
    run's command then reruns the job that failed and what reads its output, after which nothing is left to do.
    Deleting the file, as the message once said, left the run incomplete with 'Nothing to be done';
    `snakemake all --forcerun <file>`, as it then said, acted on the repository's own run when typed there."""
    _, workdir, _ = smoke_run
    logits = workdir / "results" / "logits" / "bn-4@0.parquet"
    metrics = workdir / "results" / "metrics" / "bn-4@0__gt-nanogpt.parquet"
    good = pq.read_table(logits)
    logits.write_bytes(logits.read_bytes()[:200])
    failed = snakemake(workdir, "-f", "results/metrics/bn-4@0__gt-nanogpt.parquet", check=False)
    log = (workdir / "results" / "logs" / "metrics" / "bn-4@0__gt-nanogpt.log").read_text()
    assert failed.returncode != 0
    jobs, command = follow_advice(log, os.environ)
    assert command == (f"snakemake results/logits/bn-4@0.parquet --forcerun results/logits/bn-4@0.parquet --directory "
                       f"{workdir} --cores 2 --configfile config/smoke.yaml")
    assert jobs == [("extract_logits", "model=bn-4@0")]
    assert pq.read_table(logits).equals(good)
    rerun = snakemake(workdir, "all")
    assert {rule for rule, wildcards in planned_jobs(rerun.stdout + rerun.stderr)} <= {
        "oversmoothing_metrics", "metrics_table", "position_figure", "figure_4_2", "loss_matched",
        "figure_loss_matched", "findings", "all"}  # the failed job and what reads its output; no logits or training
    assert metrics.stat().st_mtime > logits.stat().st_mtime
    assert "Nothing to be done" in dry_run_with_override(smoke_run, tmp_path, "{}\n")
