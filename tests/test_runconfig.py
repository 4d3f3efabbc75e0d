"""A run folder knows the config files it was made with (oversmooth.workflow.runconfig): a command naming others is
refused before any job, in Snakemake too (the smoke run's folder given the demo's config: tests/test_fault_drill.py)."""

import pytest

from oversmooth.workflow.runconfig import (
    RUN_CONFIG,
    RunConfigError,
    check_run_config,
    config_files,
    record_run_config,
    recorded_config_files,
    replace_requested,
)

MINI = ["config/config.yaml", "config/smoke.yaml"]


def test_config_files_are_relative_to_the_repository_and_start_with_the_default(tmp_path):
    repo = tmp_path / "repo"
    assert config_files(repo, []) == ["config/config.yaml"]
    assert config_files(repo, [repo / "config" / "config.yaml"]) == ["config/config.yaml"]
    assert config_files(repo, [repo / "config" / "smoke.yaml", tmp_path / "o.yaml"]) == [
        "config/config.yaml", "config/smoke.yaml", (tmp_path / "o.yaml").as_posix()]


def test_a_new_folder_takes_any_config_and_its_first_run_records_it(tmp_path):
    check_run_config(tmp_path, ["config/config.yaml", "config/thesis.yaml"])  # no record: nothing refused
    assert recorded_config_files(tmp_path) is None
    assert record_run_config(tmp_path, MINI)
    assert recorded_config_files(tmp_path) == MINI
    assert not record_run_config(tmp_path, ["config/config.yaml"])  # a later command keeps the first record
    assert recorded_config_files(tmp_path) == MINI


def test_a_forgotten_or_other_config_is_refused_naming_both_and_the_override(tmp_path):
    record_run_config(tmp_path, MINI)
    for other, named in [(["config/config.yaml"], "(none: config/config.yaml alone)"),
                         (["config/config.yaml", "config/thesis.yaml"], "config/thesis.yaml")]:
        with pytest.raises(RunConfigError) as err:
            check_run_config(tmp_path, other)
        message = str(err.value)
        assert "made with the config files config/smoke.yaml" in message and f"names {named}" in message
        assert "--configfile config/smoke.yaml" in message and "--config replace_run_config=true" in message


def test_the_run_s_files_followed_by_an_overlay_pass_and_the_override_replaces_the_record(tmp_path):
    record_run_config(tmp_path, MINI)
    check_run_config(tmp_path, MINI)
    check_run_config(tmp_path, [*MINI, "/tmp/override.yaml"])
    other = ["config/config.yaml", "config/thesis.yaml"]
    check_run_config(tmp_path, other, replace=True)
    assert record_run_config(tmp_path, other, replace=True)
    assert recorded_config_files(tmp_path) == other


def test_the_override_is_read_from_config_values():
    assert replace_requested({"replace_run_config": True}) and replace_requested({"replace_run_config": "true"})
    assert not replace_requested({}) and not replace_requested({"replace_run_config": False})


def test_a_damaged_record_names_itself(tmp_path):
    (tmp_path / RUN_CONFIG).parent.mkdir()
    (tmp_path / RUN_CONFIG).write_text("config_files: 3\n")
    with pytest.raises(RunConfigError, match="run_config.yaml: no list of config files"):
        check_run_config(tmp_path, MINI)
