"""Config loading and JSON-Schema validation with defaults and messages that name the key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schema" / "config.schema.yaml"


class ConfigError(ValueError):
    """The config does not satisfy the schema; the message names every offending key."""


def _with_defaults(validator_class: type) -> type:
    """A validator class that also fills in `default` values of missing properties (jsonschema FAQ)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if isinstance(subschema, dict) and "default" in subschema and name not in instance:
                    instance[name] = _copy(subschema["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _copy(value: Any) -> Any:
    """Deep copy of plain YAML data, so defaults are never shared between configs."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


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
    validator_class = _with_defaults(jsonschema.validators.validator_for(schema))
    validator = validator_class(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = [f"  {key_path(e.absolute_path)}: {e.message}" for e in errors]
        raise ConfigError("invalid config (schema " + os.fspath(schema_path) + "):\n" + "\n".join(lines))
    _check_unique_source_labels(config)
    return config


def _check_unique_source_labels(config: Mapping) -> None:
    from oversmooth.data import source_label  # local import: data imports nothing from here

    seen: dict[str, int] = {}
    for i, source in enumerate(config.get("data", {}).get("sources", [])):
        label = source_label(source, i)
        if label in seen:
            raise ConfigError(
                f"invalid config:\n  data.sources[{i}].label: {label!r} is already used by "
                f"data.sources[{seen[label]}]; give each source a distinct `label`"
            )
        seen[label] = i


def load_config(*paths: str | os.PathLike) -> dict:
    """Load YAML configs, later ones overriding earlier ones key by key (as `--configfile` does), then validate."""
    config: dict = {}
    for path in paths:
        with open(path) as f:
            deep_update(config, yaml.safe_load(f) or {})
    return validate_config(config)


def deep_update(base: dict, override: Mapping) -> dict:
    """Recursively merge `override` into `base` (dicts merge, everything else replaces)."""
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = _copy(value)
    return base
