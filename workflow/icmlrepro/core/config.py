"""The one place that reads the pipeline config: validation with clear messages, per-paper settings.

A wrong key, type or value must stop the run before any job, with one message naming the key,
what is allowed and, when the value comes from a file, the file, line and column;
:func:`validate_config` turns jsonschema's error into that message and then hands the config to
``snakemake.utils.validate`` (which also fills schema defaults). Values given with ``--config``
reach us as strings below the top level (Snakemake parses them with YAML's BaseLoader), so they
are first read as YAML where the schema wants a number, boolean, list or mapping.
``python -m icmlrepro check-config FILE`` checks one file the way ``--configfile FILE`` uses it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from .io import YamlFileError, parse_yaml
from .paths import schema_dir

SCALES = ("smoke", "default", "paper")
CHECK_HINT = "check a config file with: .venv/bin/python -m icmlrepro check-config FILE"
_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


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
    if err.validator == "minItems" and err.validator_value == 1:
        items = _subschema(schema, path + [0])
        allowed = f"; allowed: {', '.join(map(str, items['enum']))}" if "enum" in items else ""
        return f"config key '{key}': needs at least one entry, got {err.instance!r}{allowed}"
    sub = _subschema(schema, path)
    bounds = {k: sub[k] for k in ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                   "minItems", "minLength") if k in sub}
    allowed = f"; allowed: {json.dumps(bounds)}" if bounds else ""
    return f"config key '{key}': {err.message}{allowed}"


def _schema_types(schema: dict, sub: dict) -> set[str]:
    """The JSON types a (resolved) subschema allows; empty when it does not say."""
    sub = _resolve(schema, sub)
    if "type" in sub:
        return {sub["type"]} if isinstance(sub["type"], str) else set(sub["type"])
    return {_JSON_TYPES.get(type(v), "other") for v in sub.get("enum", [])}


def _typed(value: Any, schema: dict, sub: dict) -> Any:
    """``value`` with every string that the schema wants as another type read as YAML (recursively)."""
    sub = _resolve(schema, sub)
    types = _schema_types(schema, sub)
    if isinstance(value, str) and types and "string" not in types:
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value
        if isinstance(parsed, str) and "number" in types:  # YAML 1.1 reads 1e-3 as a string
            try:
                parsed = float(parsed)
            except ValueError:
                pass
        value = value if parsed is None and "null" not in types else parsed
    if isinstance(value, dict):
        props, extra = sub.get("properties", {}), sub.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else {}
        return {k: _typed(v, schema, props.get(k, extra)) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v, schema, sub.get("items", {})) for v in value]
    return value


def coerce_overrides(config: dict, schema: dict | None = None) -> dict:
    """Give ``--config`` strings the types the schema asks for, in place: ``seeds={base: 3}`` arrives
    as ``{'base': '3'}`` and ``lec={smoke: {n_seeds: 0}}`` as ``'0'``, and must be judged as numbers."""
    schema = schema or config_schema()
    config.update(_typed(dict(config), schema, schema))
    return config


def _yaml_node(node, path: list):
    """The node of a composed YAML document at ``path`` (the key's node for a mapping entry)."""
    found = node
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = [(k, v) for k, v in node.value if k.value == str(part)]
            if not match:
                return None
            found, node = match[-1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            found = node = node.value[part]
        else:
            return None
    return found


def _has_path(obj: Any, path: list) -> bool:
    for part in path:
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and isinstance(part, int) and part < len(obj):
            obj = obj[part]
        else:
            return False
    return True


def locate(path: list, files: list = (), overrides: dict | None = None) -> str | None:
    """Where the value at ``path`` was set: ``--config``, or ``FILE:LINE:COLUMN`` of the file (of
    ``files``, lowest precedence first) that set it last; the deepest enclosing key if none sets it."""
    for depth in range(len(path), -1, -1):
        if overrides and depth and _has_path(overrides, path[:depth]):
            return "--config"
        for f in reversed(list(files)):
            try:
                node = _yaml_node(yaml.compose(Path(f).read_text()), path[:depth])
            except (OSError, yaml.YAMLError):
                continue
            if node is not None and (depth or path == []):
                return f"{f}:{node.start_mark.line + 1}:{node.start_mark.column + 1}"
    return None


def _error_path(err: jsonschema.ValidationError) -> list:
    """The key the message is about: the unknown key itself for an unknown-key error."""
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = err.schema.get("properties", {})
        extra = sorted(k for k in err.instance if k not in allowed)
        path += extra[:1]
    return path


def validate_config(config: dict, files: list = (), overrides: dict | None = None) -> dict:
    """Validate (and default) the pipeline config in place; raise :class:`ConfigError` on the first problem.

    ``files`` (lowest precedence first) and ``overrides`` (the ``--config`` values) are where the
    config came from: the message then says where the offending value was set.
    """
    for f in files:  # keys given twice in one file: YAML keeps the last silently, Snakemake too
        if Path(f).exists():
            read_config_file(f)
    schema = config_schema()
    coerce_overrides(config, schema)
    validator = jsonschema.Draft202012Validator(schema)
    err = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if err is not None:
        where = locate(_error_path(err), files, overrides) if (files or overrides) else None
        raise ConfigError((f"{where}: " if where else "") + _message(err, schema))
    for paper in config["papers"]:
        if paper not in config:
            raise ConfigError(f"config key '{paper}': paper {paper!r} is listed in 'papers' "
                              f"but has no settings block")
    check_cross_references(config, files, overrides)
    from snakemake.utils import validate as snakemake_validate

    snakemake_validate(config, str(schema_dir() / "config.schema.yaml"))
    return config


# Settings that name an entry of a list in the same scale block: (paper, key naming it, key of the list).
# The schema cannot say this; without the check a typo fails after training, as a KeyError.
CROSS_REFERENCES = (
    ("lec", "routing.primary", "models"),
    ("lec", "routing.secondary", "models"),
    ("graph_alignment", "tune.source", "sources"),
    ("graph_alignment", "transfer.source", "sources"),
    ("asyncspade", "headline_budget", "budgets"),
)


def _get(block: dict, dotted: str):
    for part in dotted.split("."):
        if not isinstance(block, dict) or part not in block:
            return None
        block = block[part]
    return block


def check_cross_references(config: dict, files: list = (), overrides: dict | None = None) -> None:
    """Every setting of :data:`CROSS_REFERENCES` names an entry of its list, at every scale of the paper."""
    for paper, key, list_key in CROSS_REFERENCES:
        for scale, block in (config.get(paper) or {}).items():
            value, allowed = _get(block, key), _get(block, list_key)
            if value is None or allowed is None or value in allowed:
                continue
            path = [paper, scale, *key.split(".")]
            where = locate(path, files, overrides) if (files or overrides) else None
            raise ConfigError((f"{where}: " if where else "")
                              + f"config key '{'.'.join(path)}': {value!r} is not in '{paper}.{scale}.{list_key}' "
                              f"({', '.join(repr(v) for v in allowed)})")


def load_config(path: str | Path, overrides: dict | None = None) -> dict:
    config = read_config_file(path)
    config.update(overrides or {})
    return validate_config(config, [path])


def default_config_file() -> Path:
    return schema_dir().parent / "config.yaml"


def read_config_file(path: str | Path) -> dict:
    """One config file as a mapping; a missing file, bad YAML or a non-mapping names file, line and column."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = parse_yaml(text, str(path))
    except YamlFileError as exc:
        raise ConfigError(str(exc)) from None
    if data is None:
        if not text.strip():  # Snakemake refuses an empty --configfile; say so here too
            raise ConfigError(f"{path}:1:1: the config file is empty (Snakemake refuses an empty --configfile); "
                              "give at least one key, or leave the file out")
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1:1: a config file must map keys to values, got a {type(data).__name__}")
    return data


def check_config_file(path: str | Path, base: str | Path | None = None) -> dict:
    """Check ``path`` the way ``snakemake --configfile path`` uses it: read on top of the workflow's
    ``config/config.yaml`` (``base``), then validated; any problem names the file, line and column."""
    from snakemake.utils import update_config

    path, base = Path(path), Path(base or default_config_file())
    data = read_config_file(path)
    if path.resolve() == base.resolve():
        return validate_config(data, [path])
    config = read_config_file(base)
    update_config(config, data)
    return validate_config(config, [base, path])


def paper_settings(config: dict, paper: str, scale: str | None = None) -> dict[str, Any]:
    """The settings block of ``paper`` at ``scale`` (default: the config's scale), plus seeds."""
    scale = scale or config["scale"]
    block = copy.deepcopy(config[paper][scale])
    block["seeds"] = seeds(config, paper, scale)
    for sub in block.values():
        # a stage with its own n_seeds runs that many (the paper's seeds first): a cheap stage whose claims'
        # n* is above the paper's seed count gets its seeds without the expensive stages paying for them
        if isinstance(sub, dict) and "n_seeds" in sub:
            sub["seeds"] = seed_list(config, sub["n_seeds"])
    block["scale"] = scale
    return block


def seeds(config: dict, paper: str, scale: str | None = None) -> list[int]:
    scale = scale or config["scale"]
    return seed_list(config, config[paper][scale]["n_seeds"])


def seed_list(config: dict, n: int) -> list[int]:
    """The first ``n`` seeds from ``seeds.base``: a paper's and a stage's seeds share their start."""
    return [config["seeds"]["base"] + i for i in range(n)]


def config_hash(config: dict) -> str:
    """A short hash of the whole config, for provenance in the report."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
