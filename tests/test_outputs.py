"""The registry of outputs (oversmooth.workflow.outputs) is what the workflow builds: every table and figure Snakemake
plans is registered and every registered one it plans, each built by its entry's rule from the stages its entry reads."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import defaultdict
from html import unescape

import pytest
from workflow_helpers import SNAKEMAKE, planned_rules, repo_config

from oversmooth.core.catalog import deep_update
from oversmooth.core.names import kind_of
from oversmooth.workflow.outputs import (
    FIGURE,
    TABLE,
    TOKEN_SUFFIX,
    output,
    outputs_list,
    outputs_of,
    outputs_table,
    planned_outputs,
    registered_outputs,
    token_tbat_methods,
    token_tbat_positions,
)

CONFIGS = ("config.yaml", "smoke.yaml", "thesis.yaml", "pilot.yaml")


def planned_files(dry_run: str) -> dict[str, tuple[str, list[str]]]:
    """Each results/tables or results/figures file a `snakemake -n` run lists as a job's output: (rule, inputs)."""
    files, rule, inputs = {}, None, []
    for line in dry_run.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] in ("rule", "localrule") and words[1].endswith(":"):
            rule, inputs = words[1][:-1], []
        elif line.strip().startswith("input:"):
            inputs = [p.strip() for p in line.split("input:", 1)[1].split(",")]
        elif line.strip().startswith("output:") and rule != "all":
            for path in (p.strip() for p in line.split("output:", 1)[1].split(",")):
                if path.startswith(("results/tables/", "results/figures/")):
                    files[path.removeprefix("results/")] = (rule, inputs)
    return files


@pytest.mark.workflow
@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml", "thesis.yaml"])
def test_snakemake_plans_exactly_the_registered_outputs_each_by_its_rule(repo, tmp_path, name):
    dry = subprocess.run([str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "-d", str(tmp_path), "--configfile",
                          str(repo / "config" / name), "-n", "-F", "all"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    planned = planned_files(dry)
    entries = {file: entry for entry in planned_outputs(repo_config(name)) for file in entry.files}
    assert set(planned) == set(entries)
    for file, (rule, inputs) in planned.items():
        entry = entries[file]
        assert rule == entry.rule, file
        stages = {path.split("/")[1] for path in inputs if path.startswith("results/")}
        assert stages <= set(entry.reads), f"{file} reads {stages}, its entry says {entry.reads}"


@pytest.mark.parametrize("name", CONFIGS)
def test_each_entry_is_one_file_set_built_by_a_script_and_captioned(repo, name):
    config = repo_config(name)
    entries = registered_outputs(config)
    assert len({e.name for e in entries}) == len(entries)
    for entry in entries:
        assert (repo / "workflow" / "scripts" / f"{entry.rule}.py").is_file(), entry
        assert (repo / "workflow" / "report" / f"{entry.caption}.rst").is_file(), entry
        assert entry.kind in (TABLE, FIGURE) or entry.files[0].endswith(".md")
        if entry.planned and entry.name != "table_godey_ngram_rank":  # the data's n-gram rank has no model rows
            assert entry.rows, f"{entry.name} is planned without a model"
    for rule, kind in {(e.rule, e.kind) for e in entries}:  # a rule's wildcard reports its outputs one way
        reported = {(o.caption, o.category) for o in outputs_of(config, rule).values() if o.kind == kind}
        assert len(reported) <= 1, rule


def test_the_token_track_svd_and_checkpoints_plan_their_outputs_only_when_set(repo):
    config = repo_config("config.yaml")
    full = {o.name for o in planned_outputs(config)}
    assert {"table_4_1_tokens", "table_e_7_tokens", "table_b_tokens", "figure_token_heads", "table_7_1",
            "figure_7_1", "table_h_1", "table_loss_matched"} <= full
    bare = deep_update(repo_config("config.yaml"),
                       {"tokens": {"ranks": []}, "svd": {"ranks": []}, "checkpoints": {"iterations": []}})
    names = {o.name for o in planned_outputs(bare)}
    assert not any(n.endswith(TOKEN_SUFFIX) or n.startswith("figure_token") for n in names)
    assert not names & {"table_7_1", "table_7_2", "figure_7_1", "table_h_1", "table_loss_matched",
                        "table_godey_rank_constrained"}
    assert output(bare, "table_7_1").planned is False and output(bare, "table_7_1").rows == ()
    with pytest.raises(KeyError, match="no table or figure 'table_9_9' is registered"):
        output(bare, "table_9_9")


def test_rows_follow_the_thesis_tables(repo):
    config = repo_config("config.yaml")
    ks = config["bottlenecks"]
    assert output(config, "table_4_1").rows[:len(ks)] == tuple(f"bn-{k}" for k in ks)
    assert output(config, "table_e_7").rows == tuple(f"bn-{k}" for k in ks)  # TBAT: one linear head, no MoS
    assert output(config, "table_e_7").methods == ("pure", "greedy", "temperature")
    assert output(config, "table_5_1").rows == ("bn-4", "bn-8", "bn-32")  # nearest k = 4, 8, 32
    assert set(output(config, "figure_4_2").rows) == {f"bn-{min(ks)}", f"bn-{max(ks)}"}
    e_tables = [o.name for o in planned_outputs(config) if re.fullmatch(r"table_e_\d+", o.name)]
    assert len(e_tables) == 2 * len(config["ground_truths"]) + 2  # two per ground truth, and TBAT's E.7 and E.8


TRUNCATION_TABLES = {"table_truncation_nanogpt", "table_truncation_tbat", "table_truncation_quality"}
NEW_METHODS = ["epsilon", "eta", "typical", "min_p"]


def test_the_truncation_samplers_get_tables_only_where_the_config_measures_or_samples_one(repo):
    thesis = deep_update(repo_config("config.yaml"), {"decoding": {"methods": ["pure", "greedy", "top_k", "top_p",
                                                                               "temperature"], "bat_methods": [],
                                                              "sampler_methods": []},
                                                 "tokens": {"methods": None}})
    assert not any(o.name.startswith("table_truncation") for o in registered_outputs(thesis) if o.planned)
    assert output(thesis, "table_6_1").methods == ("pure", "greedy", "top_k", "top_p", "temperature")
    assert output(thesis, "samples_appendix_g").methods == output(thesis, "table_6_1").methods
    wide = deep_update(thesis, {"decoding": {"methods": ["pure", "min_p", *NEW_METHODS[:3]],
                                             "bat_methods": ["ba_eta", "ba_epsilon"]}})
    names = {o.name for o in planned_outputs(wide)}
    assert TRUNCATION_TABLES | {"table_truncation_tbat_tokens"} <= names
    assert "table_truncation_quality_tokens" not in names  # the token track samples pure and top-p alone
    assert not {"table_e_2", "table_e_8"} & names  # no top-k or top-p: no second group
    every = ("pure", "min_p", "epsilon", "eta", "typical", "ba_eta", "ba_epsilon")  # config order, BA after
    assert output(wide, "table_6_1").methods == every
    assert output(wide, "table_6_1_tokens").methods == every[:-2]  # no BA in the token track's metrics
    assert output(wide, "table_truncation_nanogpt").methods == every[1:]
    assert output(wide, "table_truncation_tbat").rows == tuple(f"bn-{k}" for k in wide["bottlenecks"])
    assert output(wide, "table_truncation_nanogpt").thesis.startswith("thesis §2.3")  # no thesis table's name
    assert output(wide, "samples_appendix_g").methods == every
    # a model without one head matrix samples no BA: the mixture of softmaxes is a row, its BA cells absent
    assert "mos-4" in output(deep_update(wide, {"mos": {"bottlenecks": [4]}}), "table_truncation_quality").rows


def test_a_sampler_only_method_shows_in_the_sample_tables_and_not_in_the_metrics_tables(repo, monkeypatch):
    """mirostat: what the catalog says a model samples reaches appendix G and the truncation quality table alone."""
    import oversmooth.workflow.outputs as outputs

    config = deep_update(repo_config("config.yaml"), {"decoding": {"methods": ["pure", "top_p"], "bat_methods": []}})
    plain = outputs.byte_sampling_methods
    monkeypatch.setattr(outputs, "byte_sampling_methods", lambda c, m: [*plain(c, m), "mirostat"])
    assert output(config, "samples_appendix_g").methods == ("pure", "top_p", "mirostat")
    assert output(config, "table_truncation_quality").methods == ("mirostat",)
    assert not any(o.name.startswith("table_truncation") and o.planned for o in registered_outputs(config)
                   if o.rule == "metrics_table")
    listed = deep_update(config, {"decoding": {"methods": ["pure", "top_p", "mirostat"]}})
    assert outputs.measured_methods(listed) == ["pure", "top_p"]  # stateful: no metrics, no TBAT


def test_tok_full_in_the_tbat_ranks_is_a_row_of_tables_e_7_and_e_8_not_of_table_4_1(repo):
    config = deep_update(repo_config("config.yaml"), {"tokens": {"tbat_ranks": [4, "full"]}})
    assert output(config, "table_e_7_tokens").rows == ("tok-svd-r4", "tok-learned-r4", "tok-full")
    assert "tok-full" not in output(config, "table_4_1_tokens").rows  # its TBAT is not one of Table 4.1's rows
    # the demo analyses the full head too (at its tokens.full_tbat_positions)
    assert output(repo_config("config.yaml"), "table_e_8_tokens").rows[-1] == "tok-full"


def test_tok_full_takes_its_own_tbat_positions_and_methods_where_set_and_the_heads_the_shared_ones(repo):
    config = deep_update(repo_config("thesis.yaml"), {"tokens": {"tbat_positions": 8}})
    every = config["decoding"]["methods"]
    assert config["tokens"]["full_tbat_positions"] is None  # thesis.yaml: the full head like every head
    assert token_tbat_positions(config, "tok-full") == token_tbat_positions(config, "tok-svd-r64") == 8
    assert token_tbat_methods(config, "tok-full") == every and len(every) == 9
    config = deep_update(config, {"tokens": {"full_tbat_positions": 3, "full_tbat_methods": ["top_p", "pure"]}})
    assert (token_tbat_positions(config, "tok-full"), token_tbat_positions(config, "tok-learned-r4")) == (3, 8)
    assert token_tbat_methods(config, "tok-full") == ["pure", "top_p"]  # decoding.methods' order
    assert token_tbat_methods(config, "tok-svd-r4") == every


def test_every_rule_of_the_report_stage_builds_registered_outputs(repo):
    rules = defaultdict(list)
    for entry in registered_outputs(repo_config("config.yaml")):
        rules[entry.rule].append(entry.name)
    text = (repo / "rules" / "report.smk").read_text()
    for rule in re.findall(r"^rule (\w+):", text, flags=re.MULTILINE):
        assert rule in rules, f"rule {rule} builds no registered output"


def test_the_readme_and_docs_list_the_planned_outputs(repo):
    config = repo_config("config.yaml")
    assert outputs_list(config) in (repo / "README.md").read_text(), "regenerate it: make docs"
    assert outputs_table(config) in (repo / "docs" / "outputs.md").read_text(), "regenerate it: make docs"
    assert "`table_e_7_tokens`" in outputs_list(config) and "- `figures/figure_4_2.{png,pdf}` (Figure 4.2; " in (
        outputs_table(config))


STATS = {"mean", "sd", "ci_low", "ci_high", "n", "n_infinite", "n_failed", "n_positions", "s"}
STAT_SUFFIX = re.compile(r"_(mean|sd|ci_low|ci_high|n)$")


def report_captions(html: str) -> dict[str, str]:
    """Each reported file's caption in a `snakemake --report` page, as plain text."""
    captions = {}
    entry = re.compile(r'"(results/[^"]+)": \{"name": "[^"]*", "filename": "[^"]*", "labels": [^,]*, "size": "[^"]*", '
                       r'"caption": "((?:[^"\\]|\\.)*)"')
    for match in entry.finditer(html):
        caption = json.loads(f'"{match[2]}"')
        captions[match[1]] = unescape(re.sub(r"<[^>]+>", "", caption)).lower()
    return captions


def unnamed_columns(columns: list[str], caption: str) -> list[str]:
    """The columns a caption does not name: each word of a column's name, less its ground truth in parentheses,
    its statistic (mean, sd, ci_low, ...) and model names (a column per model), must occur in the caption."""
    unnamed = []
    for column in columns:
        words = [STAT_SUFFIX.sub("", w) for w in re.sub(r"\s*\([^)]*\)$", "", column).split() if w not in STATS]
        if any(w.lower() not in caption for w in words if not is_model_name(w)):
            unnamed.append(column)
    return unnamed


def is_model_name(word: str) -> bool:
    try:
        kind_of(word)
    except ValueError:
        return False
    return True


def test_a_caption_that_leaves_a_column_out_is_caught():
    caption = "table 4.1: tto and nsmd against each ground truth; columns: bottleneck, model, positions"
    assert unnamed_columns(["bottleneck", "model", "TTO mean (gt-a)", "NSMD ci_low (gt-a)", "positions"], caption) == []
    assert unnamed_columns(["TBAT mean", "bn-4", "mauve_ci_high", "mauve_replicates"], caption) == [
        "TBAT mean", "mauve_ci_high", "mauve_replicates"]


@pytest.mark.workflow
def test_each_table_caption_names_the_columns_its_table_has(smoke_run):
    repo, workdir, _ = smoke_run
    report = workdir / "results" / "report.html"
    if not report.exists():
        subprocess.run([str(SNAKEMAKE), "-s", str(repo / "Snakefile"), "-d", str(workdir), "--configfile",
                        str(repo / "config" / "smoke.yaml"), "--report", str(report)], check=True, timeout=600,
                       capture_output=True)
    captions = report_captions(report.read_text())
    tables = [e for e in planned_outputs(repo_config("smoke.yaml")) if e.kind == TABLE]
    assert len(tables) > 20
    for entry in tables:
        path = workdir / "results" / entry.files[0]
        columns = path.read_text().splitlines()[0].split(",")
        assert unnamed_columns(columns, captions[f"results/{entry.files[0]}"]) == [], entry.name


RECIPE_ENTRY = '''        Output("table_rank_by_model", TABLE, "table_rank_by_model", "thesis §7.2", RANK, "table_rank_by_model",
               ("rank",), tuple(linear_head_models(config))),
'''
RECIPE_RULE = '''

rule table_rank_by_model:
    input:
        [rank_path(m, "effective_rank") for m in rows_of("table_rank_by_model")],
    output:
        output_files("table_rank_by_model"),
    params:
        **library_code("table_rank_by_model"),
        models=rows_of("table_rank_by_model"),
    log:
        log_path("report", "table_rank_by_model"),
    script:
        "../workflow/scripts/table_rank_by_model.py"
'''
RECIPE_SCRIPT = '''"""Snakemake adapter: every model's effective ranks in one long table."""
import pandas as pd

from oversmooth.core.io import write_csv

smk = snakemake  # noqa: F821
frames = [pd.read_csv(path).assign(model=model) for model, path in zip(smk.params.models, smk.input)]
write_csv(pd.concat(frames, ignore_index=True), smk.output[0])
'''


@pytest.mark.workflow
def test_the_add_a_table_recipe_builds_the_table_and_reruns_nothing_else(smoke_run, tmp_path):
    """docs/architecture.md's recipe, followed on a copy of the repository and of the finished smoke run: one
    registry entry, one rule, one adapter, one caption; Snakemake then plans that table and nothing else."""
    repo, workdir, _ = smoke_run
    copy, run = tmp_path / "repo", tmp_path / "run"
    shutil.copytree(repo, copy, ignore=shutil.ignore_patterns(".venv", "results", ".snakemake", ".git", "__pycache__",
                                                              ".pytest_cache", ".ruff_cache"))
    shutil.copytree(workdir, run, symlinks=True)
    outputs = copy / "src" / "oversmooth" / "workflow" / "outputs.py"
    text = outputs.read_text()
    anchor = '        Output("table_godey_ngram_rank", TABLE,'
    text = text.replace(anchor, RECIPE_ENTRY + anchor, 1)
    text = text.replace('SHOWS = {\n', 'SHOWS = {\n    "table_rank_by_model": "every model\'s effective ranks",\n', 1)
    outputs.write_text(text)
    report_rules = (copy / "rules" / "report.smk").read_text()
    report_rules = report_rules.replace("localrules:\n", "localrules:\n    table_rank_by_model,\n", 1)
    (copy / "rules" / "report.smk").write_text(report_rules + RECIPE_RULE)
    (copy / "workflow" / "scripts" / "table_rank_by_model.py").write_text(RECIPE_SCRIPT)
    (copy / "workflow" / "report" / "table_rank_by_model.rst").write_text("**Effective ranks by model**.\n")
    env = {**os.environ, "PYTHONPATH": str(copy / "src")}
    command = [str(SNAKEMAKE), "-s", str(copy / "Snakefile"), "-d", str(run), "--configfile",
               str(copy / "config" / "smoke.yaml"), "--cores", "2"]
    dry = subprocess.run([*command, "-n", "all"], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert planned_rules(dry.stdout) == {"table_rank_by_model", "all"}
    built = subprocess.run([*command, "all"], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    table = (run / "results" / "tables" / "table_rank_by_model.csv").read_text().splitlines()
    assert table[0].endswith(",model") and len(table) > len(repo_config("smoke.yaml")["bottlenecks"])
