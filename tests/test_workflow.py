"""Snakemake end to end on config/smoke.yaml, in a temporary working directory."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from oversmooth.io import sha256_file

SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def snakemake(repo, workdir, *args, overrides=(), check=True):
    """Run Snakemake on the smoke config (plus override config files) in `workdir`."""
    configs = [str(repo / "config" / "smoke.yaml"), *map(str, overrides)]
    cmd = [
        str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "--directory", str(workdir),
        "--configfile", *configs, "--cores", "2", *args,
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
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


def dry_run_with_override(smoke_run, folder, override_yaml: str) -> str:
    """Output of `snakemake -n all` on the finished smoke run with one more config file on top."""
    repo, workdir, _ = smoke_run
    override = folder / "override.yaml"
    override.write_text(override_yaml)
    result = snakemake(repo, workdir, "-n", "all", overrides=[override])
    return result.stdout + result.stderr


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    repo = Path(__file__).resolve().parents[1]
    workdir = tmp_path_factory.mktemp("smoke")
    dry = snakemake(repo, workdir, "-n", "all")
    snakemake(repo, workdir, "all")
    return repo, workdir, dry.stdout + dry.stderr


@pytest.mark.workflow
def test_dry_run_lists_every_rule(smoke_run):
    _, _, dry_output = smoke_run
    expected = {
        "prepare_corpus", "select_prompts", "train_model", "evaluate_model", "table_3_1", "figure_3_1",
        "extract_logits", "oversmoothing_metrics", "metrics_table", "figure_4_1", "figure_4_2", "figure_4_3", "tbat",
        "unargmaxable", "table_b", "time_metrics", "table_i_1", "sample", "perplexity_model", "quality",
        "quality_table", "sample_table", "figure_5_1", "all",
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
    assert table["model"].tolist() == ["bn-4", "bn-64", "gt-nanogpt"]
    assert table["heldout_loss"].notna().all() and (table["accuracy_pct"] > 0).all()
    for model in ("bn-4", "bn-64", "gt-nanogpt"):
        folder = results / "models" / model
        assert sorted(p.name for p in folder.iterdir()) == ["best.pt", "config.json", "last.pt", "train_log.csv"]
        assert "reached max_iters" in (results / "logs" / "train" / f"{model}.log").read_text()
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_3_1.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_one_bottleneck_reruns_only_that_model_and_its_descendants(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "model_overrides:\n  bn-4:\n    train: {max_iters: 30}\n")
    assert planned_rules(output) == {
        "train_model", "evaluate_model", "table_3_1", "figure_3_1", "extract_logits", "oversmoothing_metrics",
        "metrics_table", "figure_4_1", "figure_4_2", "figure_4_3", "tbat", "unargmaxable", "table_b",
        "time_metrics", "table_i_1", "sample", "quality", "quality_table", "sample_table", "figure_5_1", "all",
    }
    assert "wildcards: model=bn-4" in output
    assert "model=bn-64" not in output and "model=gt-nanogpt" not in output


@pytest.mark.workflow
def test_rerun_after_a_complete_run_has_nothing_to_do(smoke_run):
    repo, workdir, _ = smoke_run
    result = snakemake(repo, workdir, "-n", "all")
    assert "Nothing to be done" in result.stdout + result.stderr


@pytest.mark.workflow
def test_changing_a_prompt_setting_reruns_the_prompts_and_their_readers_not_training(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "eval:\n  n_prompts: 5\n")
    assert planned_rules(output) == {
        "select_prompts", "extract_logits", "oversmoothing_metrics", "metrics_table",
        "figure_4_1", "figure_4_2", "figure_4_3", "tbat", "time_metrics", "table_i_1",
        "sample", "quality", "quality_table", "sample_table", "figure_5_1", "all",
    }


@pytest.mark.workflow
def test_a_bad_config_fails_before_any_job_naming_the_key(tmp_path, repo):
    bad = tmp_path / "bad.yaml"
    bad.write_text("eval:\n  window: -5\n")
    cmd = [str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(bad), "-n"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "eval.window: -5 is less than the minimum of 1" in result.stdout + result.stderr


@pytest.mark.workflow
def test_smoke_run_writes_logits_metrics_tables_and_figures(smoke_run):
    from oversmooth.logits import LOGITS_SCHEMA
    from oversmooth.metrics import POSITION_SCHEMA

    _, workdir, _ = smoke_run
    results = workdir / "results"
    for model in ("bn-4", "bn-64", "gt-nanogpt"):
        logits = pq.ParquetFile(results / "logits" / f"{model}.parquet")
        assert logits.schema_arrow.equals(LOGITS_SCHEMA) and logits.metadata.num_rows == 8 * 64
        assert pq.read_table(results / "logits" / f"{model}.hidden.parquet").num_rows == 32
    positions = pq.read_table(results / "metrics" / "bn-4__gt-nanogpt.parquet")
    assert positions.schema.equals(POSITION_SCHEMA) and positions.num_rows == 8 * 64 * 5
    table = pd.read_csv(results / "tables" / "table_4_1.csv")
    assert table["model"].tolist() == ["bn-4", "bn-64"]
    assert table["TBAT n_positions"].tolist() == [24, 24] and (table["TBAT n_failed"] == 0).all()
    assert ((table["TBAT mean"] > 0) & (table["TBAT mean"] <= 1)).all()  # k = 4, 64 < 256: both heads are low rank
    assert (table["TTO mean (gt-nanogpt)"] >= table["NSMD mean (gt-nanogpt)"]).all()
    low, high = table["TTO ci_low (gt-nanogpt)"], table["TTO ci_high (gt-nanogpt)"]
    assert ((low <= table["TTO mean (gt-nanogpt)"]) & (table["TTO mean (gt-nanogpt)"] <= high)).all()
    table_6_1 = pd.read_csv(results / "tables" / "table_6_1.csv")
    assert list(table_6_1.columns[3:]) == ["Pure mean", "Greedy mean", "Top-K mean", "Top-P mean", "Temp. mean"]
    kl = table_6_1[table_6_1["metric"] == "KL"]
    assert np.isinf(kl["Greedy mean"]).all() and np.isfinite(kl["Pure mean"]).all()  # never a silent epsilon
    for name in ("table_4_2", "table_e_1", "table_e_2", "table_e_7", "table_e_8", "table_f_1"):
        assert len(pd.read_csv(results / "tables" / f"{name}.csv")) > 0
    for name in ("figure_4_1", "figure_4_2", "figure_4_3"):
        for ext in ("png", "pdf"):
            assert (results / "figures" / f"{name}.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_a_metric_setting_reruns_metrics_and_tables_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "metrics:\n  tau: 0.8\n")
    assert planned_rules(output) == {
        "oversmoothing_metrics", "metrics_table", "figure_4_1", "figure_4_2", "time_metrics", "table_i_1", "all",
    }


@pytest.mark.workflow
def test_one_table_from_a_clean_state_builds_only_what_it_needs(repo, tmp_path):
    result = snakemake(repo, tmp_path, "-n", "results/tables/table_4_1.csv")
    assert planned_rules(result.stdout + result.stderr) == {
        "prepare_corpus", "select_prompts", "train_model", "extract_logits", "oversmoothing_metrics", "metrics_table",
        "tbat",
    }


@pytest.mark.workflow
def test_tbat_of_a_trained_model_equals_the_definition_at_real_positions(smoke_run):
    import pyarrow.parquet as pq

    from oversmooth.reference import bat_reject_set
    from oversmooth.tbat import BATSolver, read_sampled_rows
    from oversmooth.train import load_model

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
def test_changing_a_tbat_setting_reruns_tbat_and_its_tables_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "tbat:\n  threshold: 0.3\n")
    assert planned_rules(output) == {"tbat", "metrics_table", "time_metrics", "table_i_1", "all"}
    assert "table=table_4_2" not in output and "table=table_e_7" in output


@pytest.mark.workflow
def test_smoke_run_writes_tables_b_and_i_1(smoke_run):
    _, workdir, _ = smoke_run
    tables = workdir / "results" / "tables"
    table_b = pd.read_csv(tables / "table_b.csv").fillna("")
    assert table_b["model"].tolist() == ["bn-4", "bn-64"]
    assert (table_b["n_unargmaxable"] <= table_b["n_flagged_approx"]).all() and (table_b["n_failed"] == 0).all()
    assert (table_b["n_unargmaxable"] == table_b["unargmaxable"].str.split().str.len().fillna(0)).all()
    table_i = pd.read_csv(tables / "table_i_1.csv")
    for metric in ("TTO", "NSMD", "TV", "KL", "TBAT"):
        assert (table_i[f"{metric} ours mean s"] > 0).all() and (table_i[f"{metric} reference mean s"] > 0).all()


@pytest.mark.workflow
def test_smoke_run_samples_and_scores_quality(smoke_run):
    from oversmooth.sampling import SAMPLES_SCHEMA

    _, workdir, _ = smoke_run
    results = workdir / "results"
    samples = pq.read_table(results / "samples" / "bn-4.parquet")
    assert samples.schema.equals(SAMPLES_SCHEMA) and samples.num_rows == 8 * 5
    assert {len(c) for c in samples.column("continuation").to_pylist()} == {64}
    table = pd.read_csv(results / "tables" / "table_5_3.csv")
    assert table["model"].tolist() == ["bn-4", "bn-64", "gt-nanogpt", "human"]
    assert (table["perplexity_mean"] > 1).all() and table["byte_tv"].iloc[-1] == 0.0
    assert len(pd.read_csv(results / "tables" / "table_6_2.csv")) == 3 * 3 + 1
    assert "**" in (results / "tables" / "table_5_1.md").read_text()
    for ext in ("png", "pdf"):
        assert (results / "figures" / f"figure_5_1.{ext}").stat().st_size > 1000


@pytest.mark.workflow
def test_changing_a_quality_setting_reruns_quality_only(smoke_run, tmp_path):
    output = dry_run_with_override(smoke_run, tmp_path, "quality:\n  repetition_n: 3\n")
    assert planned_rules(output) == {"quality", "quality_table", "all"}
