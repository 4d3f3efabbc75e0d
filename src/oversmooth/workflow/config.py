"""Config loading and JSON-Schema validation with defaults and messages that name the key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
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

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "config" / "schema" / "config.schema.yaml"


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
        lines = [f"  {key_path(e.absolute_path)}: {e.message}" for e in errors]
        raise ConfigError("invalid config (schema " + os.fspath(schema_path) + "):\n" + "\n".join(lines))
    _check_unique_source_labels(config)
    _check_rank_settings(config)
    _check_token_settings(config)
    _check_sampling_prompts(config)
    _check_checkpoints(config)
    _check_seeds(config)
    _check_teacher_sources(config)
    return config


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
    """The token track samples with methods of `decoding.methods` only (their settings live there), and analyses
    the unargmaxable tokens and TBAT of heads it builds."""
    tokens = config.get("tokens", {})
    wanted = tokens.get("sampling", {}).get("methods") or []
    decoding = config.get("decoding", {}).get("methods", [])
    problems = []
    unknown = [m for m in wanted if m not in decoding]
    if unknown:
        problems.append(f"  tokens.sampling.methods: {unknown} are not in decoding.methods {decoding}")
    for key in ("unargmaxable_ranks", "tbat_ranks"):
        unbuilt = [k for k in tokens.get(key, []) if k not in tokens.get("ranks", [])]
        if unbuilt:
            problems.append(f"  tokens.{key}: {unbuilt} are not in tokens.ranks {tokens.get('ranks')}")
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


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
    if problems:
        raise ConfigError("invalid config:\n" + "\n".join(problems))


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


def _looks_local(path: str) -> bool:
    return os.path.isabs(path) or path.startswith((".", "~"))


def check_paths(config: Mapping) -> None:
    """Every local file or folder the config names must exist before the DAG is built; raise ConfigError naming
    each setting that names a missing one (else the error comes at job time, after other jobs ran)."""
    from oversmooth.data.corpus import (  # local import: data imports nothing here
        DataSourceError,
        source_files,
        source_label,
    )

    folders = [(f"ground_truths[{i}].path", gt["path"]) for i, gt in enumerate(config["ground_truths"])
               if gt["kind"] == "hf" or (gt["kind"] == "token" and gt["path"] != PACKAGED_MODEL)]
    folders += [(key, value) for key, value in (("tokens.source", config["tokens"]["source"]),
                                                ("quality.perplexity_model", config["quality"]["perplexity_model"]))
                if value != PACKAGED_MODEL]
    problems = [f"  {key}: no folder {path!r} (relative to {os.getcwd()})" for key, path in folders
                if not os.path.isdir(os.path.expanduser(path))]
    corpora = [("data.sources", config["data"]["sources"])]
    corpora += [(f"ground_truths[{i}].corpus", gt["corpus"]) for i, gt in enumerate(config["ground_truths"]) if gt.get("corpus")]
    for key, sources in corpora:
        for i, source in enumerate(sources):
            if source["kind"] == "files":
                try:
                    source_files(source, source_label(source, i))
                except DataSourceError as err:
                    problems.append(f"  {key}[{i}].paths: {err}")
            elif source["kind"] == "hf" and _looks_local(source["path"]) and not os.path.exists(os.path.expanduser(source["path"])):
                problems.append(f"  {key}[{i}].path: no such file or folder {source['path']!r}")
    if problems:
        raise ConfigError("the config names local files or folders that do not exist:\n" + "\n".join(problems))


def load_config(*paths: str | os.PathLike) -> dict:
    """Load YAML configs, later ones overriding earlier ones key by key (as `--configfile` does), then validate."""
    config: dict = {}
    for path in paths:
        with open(path) as f:
            deep_update(config, yaml.safe_load(f) or {})
    return validate_config(config)


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

    return "`" + json.dumps(value).replace("|", "\\|") + "`"


def reference_markdown(schema_path: str | os.PathLike = SCHEMA_PATH) -> str:
    """docs/configuration.md's reference table, generated from the schema."""
    rows = _reference_rows(load_schema(schema_path))
    lines = ["| key | default | meaning |", "|---|---|---|"]
    lines += [f"| `{key}` | {default} | {text.replace('|', '/')} |" for key, default, text in rows]
    return "\n".join([REFERENCE_BEGIN, *lines, REFERENCE_END])


if __name__ == "__main__":
    print(reference_markdown())
