"""The models of a config: names, settings, which tables they join."""

import pytest
from workflow_helpers import repo_config

from oversmooth.core import catalog
from oversmooth.core.catalog import (
    all_models,
    bottleneck_of,
    checkpoint_models,
    checkpoint_parts,
    family_models,
    linear_head_models,
    sampled_models,
    seed_parts,
    svd_source,
    token_rank,
    trained_models,
    training_settings,
    without_seed_runs,
)
from oversmooth.core.names import kind_of, pattern
from oversmooth.workflow.config import load_config


@pytest.fixture
def config(repo, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text("mos: {bottlenecks: [4], components: 3}\nmodel_overrides:\n  mos-4:\n    train: {max_iters: 7}\n")
    return load_config(repo / "config" / "config.yaml", extra)


def test_mos_members_join_the_family_but_not_the_linear_head_analyses(config):
    assert family_models(config) == ["bn-4", "bn-8", "bn-16", "bn-32", "bn-256", "mos-4"]
    assert trained_models(config)[-2:] == ["mos-4", "gt-nanogpt"]
    assert all_models(config)[-3:] == ["mos-4", "gt-smollm2", "gt-nanogpt"]
    assert "mos-4" not in linear_head_models(config) and "bn-4" in linear_head_models(config)
    assert svd_source(config) == "bn-256"


def test_mos_settings_are_the_family_s_with_its_components_and_overrides(config):
    settings = training_settings(config, "mos-4")
    assert settings["model"]["bottleneck"] == 4 and settings["model"]["mos_components"] == 3
    assert settings["train"]["max_iters"] == 7 and training_settings(config, "bn-4")["train"]["max_iters"] == 240
    assert "mos_components" not in training_settings(config, "bn-4")["model"]
    with pytest.raises(KeyError, match=r"mos-8: 8 is not in config `mos.bottlenecks` \[4\]"):
        training_settings(config, "mos-8")


def test_bottleneck_of_every_constrained_name():
    assert [bottleneck_of(n) for n in ("bn-16", "mos-4", "svd-r32")] == [16, 4, 32]
    with pytest.raises(ValueError, match="not a constrained model"):
        bottleneck_of("gt-nanogpt")


def test_token_rank_is_a_head_s_k_and_none_for_the_full_head():
    assert [token_rank(n) for n in ("tok-svd-r4", "tok-learned-r64", "tok-full")] == [4, 64, None]
    with pytest.raises(ValueError, match="not a token-track head"):
        token_rank("tok-human")


def test_a_ground_truth_with_sample_false_is_not_sampled(config):
    # the demo samples neither ground truth (`sample: false`: gt-smollm2 judges the samples, gt-nanogpt's would cost
    # a minute); a ground truth is sampled by default
    assert sampled_models(config)[-1] == "mos-4" and not any(m.startswith("gt-") for m in sampled_models(config))
    assert "gt-smollm2" in all_models(config) and "gt-smollm2" not in trained_models(config)
    config["ground_truths"][1]["sample"] = True
    assert sampled_models(config)[-2:] == ["mos-4", "gt-nanogpt"]


def test_checkpoints_are_models_of_the_family_with_their_run_s_settings(config):
    config["checkpoints"]["iterations"] = [80, 160]
    assert checkpoint_models(config)[:3] == ["bn-4@80", "bn-4@160", "bn-8@80"] and len(checkpoint_models(config)) == 10
    assert checkpoint_models(config, "bn-16") == ["bn-16@80", "bn-16@160"]
    assert checkpoint_parts("bn-16@80") == ("bn-16", 80) and checkpoint_parts("bn-16") == ("bn-16", None)
    assert bottleneck_of("bn-16@80") == 16
    assert training_settings(config, "bn-16@80") == training_settings(config, "bn-16")
    with pytest.raises(ValueError, match="'bn-16@x' is not a checkpoint"):
        checkpoint_parts("bn-16@x")


def test_seed_runs_join_every_bottleneck_list_with_their_own_seed_and_the_shared_settings(config):
    config["train"]["seeds"] = [3, 9]
    config["model_overrides"]["bn-4-s9"] = {"train": {"max_iters": 11}}
    config["checkpoints"]["iterations"] = [80]
    assert family_models(config)[:4] == ["bn-4", "bn-4-s3", "bn-4-s9", "bn-8"] and len(family_models(config)) == 16
    assert checkpoint_models(config) == ["bn-4@80", "bn-8@80", "bn-16@80", "bn-32@80", "bn-256@80"]  # master seed
    assert seed_parts("bn-4-s9") == ("bn-4", 9) and seed_parts("bn-4") == ("bn-4", None)
    assert seed_parts("gt-a-s1") == ("gt-a-s1", None) and bottleneck_of("bn-16-s3@80") == 16
    assert without_seed_runs(family_models(config))[:2] == ["bn-4", "bn-8"]
    main, run = training_settings(config, "bn-4"), training_settings(config, "bn-4-s3")
    assert main["train"]["seed"] == config["seed"] and run["train"]["seed"] == 3
    assert {**run["train"], "seed": main["train"]["seed"]} == main["train"] and run["model"] == main["model"]
    assert "seeds" not in main["train"]  # adding a seed changes no other run's settings
    assert training_settings(config, "bn-4-s9")["train"]["max_iters"] == 11
    assert training_settings(config, "bn-4-s3")["train"]["max_iters"] == 240
    with pytest.raises(KeyError, match=r"bn-4-s5: seed 5 is not in config `train.seeds` \[3, 9\]"):
        training_settings(config, "bn-4-s5")


@pytest.mark.parametrize("name", ["config.yaml", "smoke.yaml", "thesis.yaml", "pilot.yaml"])
def test_every_name_the_catalog_builds_follows_the_grammar_of_names(repo, name):
    config = repo_config(name)
    built = {
        "bottleneck": catalog.bottleneck_models(config),
        "checkpoint": catalog.checkpoint_models(config),
        "mos": catalog.mos_models(config),
        "svd": catalog.svd_models(config),
        "ground_truth": catalog.ground_truth_models(config),
        "token_head": catalog.token_head_models(config),
        "token_reference": [catalog.TOKEN_REFERENCE],
        "token_human": [catalog.TOKEN_HUMAN],
    }
    for kind, names in built.items():
        for model in names:
            assert kind_of(model) == kind, model
    for model in built["checkpoint"]:
        assert kind_of(catalog.checkpoint_parts(model)[0]) == "bottleneck"


def test_the_grammar_names_unknown_kinds_and_names():
    assert pattern("bottleneck", "checkpoint") == r"bn-\d+(?:-s\d+)?|bn-\d+(?:-s\d+)?@\d+"
    assert kind_of("bn-4-s8") == "bottleneck" and kind_of("bn-4@80") == "checkpoint" and kind_of("human") == "human"
    with pytest.raises(KeyError, match="unknown model kind"):
        pattern("bottlenecks")
    with pytest.raises(ValueError, match="'bn-x' is no model name"):
        kind_of("bn-x")


def test_bat_sampling_goes_to_the_byte_models_whose_head_is_one_softmax_of_a_matrix():
    config = repo_config("teacher.yaml")
    config["decoding"] = {**config["decoding"], "methods": ["pure", "top_p"], "bat_methods": ["ba_epsilon"],
                          "sampler_methods": ["mirostat"]}
    config["svd"] = {**config["svd"], "decoding": ["pure"]}
    config["ground_truths"] = [*config["ground_truths"], {"name": "eva", "kind": "hf", "path": "x"}]
    for model in ("bn-4", "bn-4-s8", "gt-nanogpt"):
        assert catalog.byte_sampling_methods(config, model) == ["pure", "top_p", "ba_epsilon", "mirostat"], model
        assert catalog.byte_bat_methods(config, model) == ["ba_epsilon"], model  # its metrics and TBAT too
    # a mixture, loaded ground truths, the truth, a checkpoint along training (its BA costs, no table shows it);
    # mirostat: any distribution
    for model in ("mos-4", "gt-smollm2", "gt-eva", "gt-teacher", "bn-4@80", "bn-4-s8@80"):
        assert catalog.byte_sampling_methods(config, model) == ["pure", "top_p", "mirostat"], model
        assert catalog.byte_bat_methods(config, model) == [], model
    assert catalog.byte_sampling_methods(config, "svd-r4") == ["pure"] and catalog.byte_bat_methods(config, "svd-r4") == []
    assert catalog.byte_bat_methods(config, "tok-svd-r4") == []  # the token track: no BA in its metrics or TBAT
