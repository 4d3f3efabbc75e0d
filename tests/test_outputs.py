"""The registry of outputs (oversmooth.outputs) is what the workflow builds: every table and figure Snakemake plans
is registered and every registered one it plans, each built by its entry's rule from the stages its entry reads."""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict

import pytest
from workflow_helpers import SNAKEMAKE

from oversmooth.catalog import deep_update
from oversmooth.config import load_config
from oversmooth.outputs import (
    FIGURE,
    TABLE,
    TOKEN_SUFFIX,
    output,
    outputs_list,
    outputs_of,
    outputs_table,
    planned_outputs,
    registered_outputs,
)

CONFIGS = ("config.yaml", "smoke.yaml", "thesis.yaml", "pilot.yaml")


def config_of(repo, name):
    paths = [repo / "config" / "config.yaml"] + ([] if name == "config.yaml" else [repo / "config" / name])
    return load_config(*paths)


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
    entries = {file: entry for entry in planned_outputs(config_of(repo, name)) for file in entry.files}
    assert set(planned) == set(entries)
    for file, (rule, inputs) in planned.items():
        entry = entries[file]
        assert rule == entry.rule, file
        stages = {path.split("/")[1] for path in inputs if path.startswith("results/")}
        assert stages <= set(entry.reads), f"{file} reads {stages}, its entry says {entry.reads}"


@pytest.mark.parametrize("name", CONFIGS)
def test_each_entry_is_one_file_set_built_by_a_script_and_captioned(repo, name):
    config = config_of(repo, name)
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
    config = config_of(repo, "config.yaml")
    full = {o.name for o in planned_outputs(config)}
    assert {"table_4_1_tokens", "table_e_7_tokens", "table_b_tokens", "figure_token_heads", "table_7_1",
            "figure_7_1", "table_h_1", "table_loss_matched"} <= full
    bare = deep_update(config_of(repo, "config.yaml"),
                       {"tokens": {"ranks": []}, "svd": {"ranks": []}, "checkpoints": {"iterations": []}})
    names = {o.name for o in planned_outputs(bare)}
    assert not any(n.endswith(TOKEN_SUFFIX) or n.startswith("figure_token") for n in names)
    assert not names & {"table_7_1", "table_7_2", "figure_7_1", "table_h_1", "table_loss_matched",
                        "table_godey_rank_constrained"}
    assert output(bare, "table_7_1").planned is False and output(bare, "table_7_1").rows == ()
    with pytest.raises(KeyError, match="no table or figure 'table_9_9' is registered"):
        output(bare, "table_9_9")


def test_rows_follow_the_thesis_tables(repo):
    config = config_of(repo, "config.yaml")
    ks = config["bottlenecks"]
    assert output(config, "table_4_1").rows[:len(ks)] == tuple(f"bn-{k}" for k in ks)
    assert output(config, "table_e_7").rows == tuple(f"bn-{k}" for k in ks)  # TBAT: one linear head, no MoS
    assert output(config, "table_e_7").methods == ("pure", "greedy", "temperature")
    assert output(config, "table_5_1").rows == ("bn-4", "bn-8", "bn-32")  # nearest k = 4, 8, 32
    assert set(output(config, "figure_4_2").rows) == {f"bn-{min(ks)}", f"bn-{max(ks)}"}
    e_tables = [o.name for o in planned_outputs(config) if re.fullmatch(r"table_e_\d+", o.name)]
    assert len(e_tables) == 2 * len(config["ground_truths"]) + 2  # two per ground truth, and TBAT's E.7 and E.8


def test_every_rule_of_the_report_stage_builds_registered_outputs(repo):
    rules = defaultdict(list)
    for entry in registered_outputs(config_of(repo, "config.yaml")):
        rules[entry.rule].append(entry.name)
    text = (repo / "rules" / "report.smk").read_text()
    for rule in re.findall(r"^rule (\w+):", text, flags=re.MULTILINE):
        assert rule in rules, f"rule {rule} builds no registered output"


def test_the_readme_and_docs_list_the_planned_outputs(repo):
    config = config_of(repo, "config.yaml")
    assert outputs_list(config) in (repo / "README.md").read_text(), "regenerate it: make docs"
    assert outputs_table(config) in (repo / "docs" / "outputs.md").read_text(), "regenerate it: make docs"
    assert "`table_e_7_tokens`" in outputs_list(config) and "| `figures/figure_4_2.{png,pdf}` | Figure 4.2 |" in (
        outputs_table(config))
