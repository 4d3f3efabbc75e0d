"""The commands the pipeline's errors advise: the run's own options, and what each command rebuilds (followed
literally on copies of the smoke run in tests/test_fault_drill.py and tests/test_workflow.py)."""

import json
import re
import shlex

import pytest
from conftest import RUN_OPTIONS

from oversmooth.core.recovery import (
    command_line_profiles,
    lost_outputs_note,
    noting_lost_outputs,
    restore_advice,
    run_options,
)


def test_a_run_s_options_name_its_folder_from_the_repository_and_everything_it_was_started_with(tmp_path):
    repository = tmp_path / "repo"
    inside = run_options(repository, repository / "runs" / "pilot", configfiles=[repository / "config" / "pilot.yaml",
                         tmp_path / "cluster.yaml"], config={"metrics": {"tau": "0.8"}}, profiles=["profiles/slurm"],
                         cores=4)
    assert inside == ["--directory", "runs/pilot", "--profile", "profiles/slurm", "--config", 'metrics={"tau": "0.8"}',
                      "--configfile", "config/pilot.yaml", f"{tmp_path}/cluster.yaml"]  # no cores: the profile's
    # a run in the repository's own folder names none; one outside it, its absolute path
    assert run_options(repository, repository, cores=2) == ["--cores", "2"]
    assert run_options(repository, tmp_path / "elsewhere")[:2] == ["--directory", f"{tmp_path}/elsewhere"]


def test_the_profiles_of_a_command_line_are_found_in_either_form():
    argv = ["snakemake", "all", "--profile", "profiles/slurm", "-n", "--profile=extra", "--configfile", "x.yaml"]
    assert command_line_profiles(argv) == ["profiles/slurm", "extra"]
    assert command_line_profiles(["snakemake", "--profile"]) == []


def test_a_failed_job_s_error_names_the_outputs_snakemake_deleted_and_the_command_that_rebuilds_them(in_a_run):
    outputs = ["results/data/prompts.parquet"]
    with pytest.raises(ValueError) as error, noting_lost_outputs(outputs):
        raise ValueError("eval.n_prompts asks for 8")
    note = error.value.__notes__[0]
    assert note == lost_outputs_note(outputs, "ValueError: eval.n_prompts asks for 8")
    assert "deleted this job's outputs before it ran (results/data/prompts.parquet)" in note
    command = re.search(r"`([^`]+)`, typed in (\S+):", note)
    assert command.group(1) == f"snakemake results/data/prompts.parquet {RUN_OPTIONS}"
    assert command.group(2) == str(in_a_run)
    assert shlex.split(command.group(1))[1] == "results/data/prompts.parquet"  # the target, not a config file


def test_a_failed_job_s_advice_names_its_cause_and_leaves_out_the_run_s_config_values(tmp_path, monkeypatch):
    """A `files` source given with `--config` whose file the data job refused: the advice repeated the `--config`
    value, and followed as printed failed again the same way. It names the cause, and its command rebuilds what the
    run's config files say."""
    from oversmooth.core.recovery import RUN_VARIABLE, run_record
    from oversmooth.data.corpus import DataSourceError

    folder = tmp_path / "runs" / "r"
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    source = {"sources": [{"kind": "files", "paths": ["/data/bad"]}]}
    options = run_options(tmp_path, folder, configfiles=[tmp_path / "config" / "x.yaml"], config={"data": source},
                          cores=2)
    monkeypatch.setenv(RUN_VARIABLE, run_record(tmp_path, options))
    outputs = ["results/data/train.bin", "results/data/val.bin"]
    with pytest.raises(DataSourceError) as error, noting_lost_outputs(outputs):
        raise DataSourceError("source 'files0' file /data/bad/a.txt: not text: a NUL byte at offset 9000\nmore")
    note = error.value.__notes__[0]
    assert ("Its cause: DataSourceError: source 'files0' file /data/bad/a.txt: not text: a NUL byte at offset 9000. "
            "Once the cause is fixed, rebuild them alone with") in note
    command = re.search(r"`(snakemake [^`]+)`, typed in (\S+):", note).group(1)
    assert command == f"snakemake results/data/train.bin {RUN_OPTIONS}"  # no --config
    assert f"leaves out this run's `--config` values ({shlex.quote(f'data={json.dumps(source)}')})" in note


def test_without_a_run_the_advice_says_what_to_add(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OVERSMOOTH_RUN", raising=False)
    advice = restore_advice("results/logits/bn-4.parquet")
    assert "`snakemake results/logits/bn-4.parquet --forcerun results/logits/bn-4.parquet` (with the run's own " \
           "--directory, config files and profile)" in advice
