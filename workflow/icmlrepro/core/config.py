"""The one place that reads the pipeline config: validation with clear messages, per-paper settings.

A wrong key, type or value must stop the run before any job, with one message naming the key
and what is allowed; :func:`validate_config` turns jsonschema's error into that message and then
hands the config to ``snakemake.utils.validate`` (which also fills schema defaults).
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .paths import schema_dir

SCALES = ("smoke", "default", "paper")


class ConfigError(ValueError):
    """The config breaks its schema; the message names the key and the allowed values."""


def config_schema() -> dict:
    return yaml.safe_load((schema_dir() / "config.schema.yaml").read_text())


def _resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = schema
        for part in ref[2:].split("/"):
            node = node[part]
    return node


def _subschema(schema: dict, path: list) -> dict:
    node = _resolve(schema, schema)
    for part in path:
        if isinstance(part, int):
            node = _resolve(schema, node.get("items", {}))
        else:
            node = _resolve(schema, node.get("properties", {}).get(part, {}))
    return node


def _message(err: jsonschema.ValidationError, schema: dict) -> str:
    path = list(err.absolute_path)
    key = ".".join(str(p) for p in path) or "(top level)"
    if err.validator == "additionalProperties":
        parent = _subschema(schema, path)
        allowed = sorted(parent.get("properties", {}))
        extra = sorted(set(err.instance) - set(allowed)) if isinstance(err.instance, dict) else []
        where = f"under '{key}'" if path else "at the top level"
        return (f"unknown config key {', '.join(repr('.'.join(map(str, path + [e]))) for e in extra)} "
                f"{where}; allowed keys: {', '.join(allowed)}")
    if err.validator == "enum":
        return f"config key '{key}': {err.instance!r} is not allowed; allowed values: " + \
            ", ".join(repr(v) for v in err.validator_value)
    if err.validator == "required":
        return f"config key '{key}': {err.message}"
    sub = _subschema(schema, path)
    bounds = {k: sub[k] for k in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                   "minItems", "minLength") if k in sub}
    allowed = f"; allowed: {json.dumps(bounds)}" if bounds else ""
    return f"config key '{key}': {err.message}{allowed}"


def validate_config(config: dict) -> dict:
    """Validate (and default) the pipeline config in place; raise :class:`ConfigError` on the first problem."""
    schema = config_schema()
    validator = jsonschema.Draft202012Validator(schema)
    err = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if err is not None:
        raise ConfigError(_message(err, schema))
    for paper in config["papers"]:
        if paper not in config:
            raise ConfigError(f"config key '{paper}': paper {paper!r} is listed in 'papers' "
                              f"but has no settings block")
    from snakemake.utils import validate as snakemake_validate

    snakemake_validate(config, str(schema_dir() / "config.schema.yaml"))
    return config


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    config = yaml.safe_load(Path(path).read_text())
    config.update(overrides or {})
    return validate_config(config)


def paper_settings(config: dict, paper: str, scale: str | None = None) -> dict[str, Any]:
    """The settings block of ``paper`` at ``scale`` (default: the config's scale), plus seeds."""
    scale = scale or config["scale"]
    block = copy.deepcopy(config[paper][scale])
    block["seeds"] = seeds(config, paper, scale)
    block["scale"] = scale
    return block


def seeds(config: dict, paper: str, scale: str | None = None) -> list[int]:
    scale = scale or config["scale"]
    n = config[paper][scale]["n_seeds"]
    return [config["seeds"]["base"] + i for i in range(n)]


def config_hash(config: dict) -> str:
    """A short hash of the whole config, for provenance in the report."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
