"""`all` names every file of the run (oversmooth.workflow.runfiles), so that it rebuilds a missing intermediate
result, which Snakemake alone leaves missing while its readers are up to date."""

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from workflow_helpers import REPO, SNAKEMAKE

TOY = """
from oversmooth.workflow.runfiles import run_files

rule all:
    input:
        {all_input}

rule source:
    output: "x.txt"
    shell: "echo x > {{output}}"

rule state:
    input: "x.txt"
    output: temp("state.txt")
    shell: "cat {{input}} > {{output}}"

rule result:
    input: "state.txt"
    output: "y.txt"
    shell: "cat {{input}} > {{output}}"
"""


def toy_run(folder: Path, all_input: str) -> Path:
    """A finished run of a three-rule toy workflow whose `all` asks for `all_input`."""
    folder.mkdir()
    (folder / "Snakefile").write_text(TOY.format(all_input=all_input))
    subprocess.run([str(SNAKEMAKE), "--cores", "1"], cwd=folder, check=True, capture_output=True)
    return folder


def dry_run(folder: Path, *args: str) -> str:
    out = subprocess.run([str(SNAKEMAKE), "-n", "--cores", "1", *args], cwd=folder, capture_output=True, text=True,
                         check=True)
    return out.stdout + out.stderr


def test_all_rebuilds_a_missing_intermediate_file_that_snakemake_alone_leaves_missing(tmp_path):
    plain = toy_run(tmp_path / "plain", '"y.txt"')
    (plain / "x.txt").unlink()
    assert "Nothing to be done" in dry_run(plain)  # Snakemake's own behaviour

    walked = toy_run(tmp_path / "walked", 'lambda w: run_files(workflow.rules, ["y.txt"], workflow._ruleorder)')
    assert not (walked / "state.txt").exists()  # a temporary, deleted once read: not asked for
    assert "Nothing to be done" in dry_run(walked)
    (walked / "x.txt").unlink()
    assert re.search(r"rule source:\n\s+output: x.txt", dry_run(walked))


def all_inputs(dry: str) -> set[str]:
    """The files the `all` job of a `snakemake -n` listing asks for."""
    return set(re.search(r"\n(?:local)?rule all:\n    input: (.*)\n", dry).group(1).split(", "))


def summary_files(summary: str) -> set[str]:
    """Every output of every job in Snakemake's `--summary`."""
    return {line.split("\t")[0] for line in summary.splitlines() if line.startswith("results/")}


@pytest.mark.parametrize("configs", [(), ("thesis.yaml",)])
def test_all_asks_for_every_output_of_every_job_but_temporaries(tmp_path, configs):
    """The walk finds what Snakemake's own DAG holds (its `--summary`), but a training's hand-over states (temp)."""
    options = ["-s", str(REPO / "Snakefile"), "--directory", str(tmp_path)]
    if configs:
        options += ["--configfile", *(str(REPO / "config" / name) for name in configs)]
    asked = all_inputs(dry_run(tmp_path, *options, "-F", "all"))
    summary = subprocess.run([str(SNAKEMAKE), *options, "--summary"], capture_output=True, text=True, check=True)
    made = summary_files(summary.stdout)
    temporaries = {f for f in made if re.fullmatch(r"results/models/[^/]+/segments/\d+\.pt", f)}
    assert asked == made - temporaries
    assert bool(temporaries) == bool(configs)  # the thesis's trainings are split into jobs, the demo's are not
