"""Values of the command line and of config files: `--set KEY=VALUE`, TOML, YAML and JSON parsing,
the conversion of a value to a config field's type (task arguments to their constructor's
types), and did-you-mean hints. Standard library only (and the task registry's light table), so
that a bad value is answered before torch is imported."""

from __future__ import annotations

import difflib
import json
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

from bench.errors import UsageError


def did_you_mean(name: str, valid: typing.Iterable[str]) -> str:
    """The hint ` (did you mean 'x'?)` for the valid name closest to `name`; "" when none is close."""
    close = difflib.get_close_matches(name, list(valid), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def coerce_value(name: str, raw: Any, annotation: Any) -> Any:
    """Convert a CLI/TOML value to the field's type, or raise a one-line UsageError."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null")):
            return None
        return coerce_value(name, raw, options[0])
    if annotation is bool:
        if isinstance(raw, bool):
            return raw
        if str(raw).lower() in ("1", "true", "yes", "on"):
            return True
        if str(raw).lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"{name}: expected true or false, got {raw!r}")
    if annotation in (int, float):
        try:
            value = annotation(raw)
        except (TypeError, ValueError, OverflowError):  # OverflowError: int(inf), e.g. 1e999
            raise UsageError(f"{name}: expected {annotation.__name__}, got {raw!r}") from None
        if annotation is int and isinstance(raw, float) and raw != int(raw):
            raise UsageError(f"{name}: expected int, got {raw!r}")
        return value
    if annotation is str:
        return str(raw)
    return raw


def _parse_value(text: str) -> Any:
    """Parse a `--set` value with TOML rules where possible (numbers, bools), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_set_options(items: list[str]) -> dict[str, Any]:
    """Turn `["algo.dis_eps_high=4", "steps=10"]` into a nested override dict."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set expects KEY=VALUE, got {item!r}")
        section, dot, sub = key.partition(".")
        if dot and section in ("algo", "task"):
            out.setdefault(f"{section}_args", {})[sub] = _parse_value(value)
        elif dot and section == "engine_args":
            out.setdefault("engine_args", {})[sub] = _parse_value(value)
        elif dot:
            hint = did_you_mean(section, ("algo", "task", "engine_args"))
            raise UsageError(f"--set {key}: only 'algo.', 'task.' and 'engine_args.' keys are nested{hint}")
        else:
            out[key] = _parse_value(value)
    return out


def load_config_file(path: str | Path) -> list[dict[str, Any]]:
    """The config layers of a run config file, lowest first: TOML or YAML (`.yaml`/`.yml`; one
    layer; a `[algo]`/`[task]` table, or an `algo:`/`task:` mapping, becomes algo_args/task_args)
    or JSON (one layer, e.g. a run's config.json, so `--config runs/x/config.json` repeats a run's
    settings; or a list of layers, as comparison and sweep workers write them for
    `bench.config.build_run` to merge). Every layer then goes through the same validation."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--config: file not found: {path}")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config {path}: invalid JSON: {exc}") from None
        layers = data if isinstance(data, list) else [data]
        if not layers or not all(isinstance(layer, dict) for layer in layers):
            raise UsageError(f"--config {path}: expected a JSON object of config fields (or a list of them)")
        return layers
    data = _read_yaml(path) if path.suffix in (".yaml", ".yml") else _read_toml(path)
    for section in ("algo", "task"):
        if isinstance(data.get(section), dict):
            data[f"{section}_args"] = data.pop(section)
    return [data]


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--config {path}: invalid TOML: {exc}") from None


def _read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping (safe loader: plain data only); an empty file is an empty mapping."""
    import yaml  # only for YAML configs

    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise UsageError(f"--config {path}: invalid YAML: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(
            f"--config {path}: expected a YAML mapping of config fields, got {type(data).__name__}"
        )
    return data


def coerce_task_args(task: str, task_args: dict[str, Any]) -> dict[str, Any]:
    """`task_args` converted to the types of the task constructor's annotated parameters.

    `--set task.X=V` values arrive as TOML parsed them (`False` stays the string "False"), so
    each argument the constructor annotates goes through `coerce_value`, as algorithm fields do: a
    bad value is a one-line error naming `task.X`. Arguments the constructor does not name are
    passed on unchanged, for the constructor to reject with the task's own message.
    """
    from envs import registry as task_registry

    try:
        hints = typing.get_type_hints(task_registry.get(task).__init__)
    except (NameError, TypeError):  # an annotation that cannot be resolved: no conversion
        hints = {}
    hints.pop("return", None)  # the only annotation that is not a parameter
    _check_task_arg_names(task, task_registry.get(task), task_args)
    return {
        key: coerce_value(f"task.{key}", value, hints[key]) if key in hints else value
        for key, value in task_args.items()
    }


def _check_task_arg_names(task: str, cls: type, task_args: dict[str, Any]) -> None:
    """An argument the task's constructor does not take: a one-line UsageError with a
    did-you-mean and the valid arguments (constructors taking **kwargs accept anything)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    valid = [name for name in params if name != "self"]
    for key in task_args:
        if key not in valid:
            raise UsageError(
                f"task.{key}: unknown argument of task {task!r}{did_you_mean(key, valid)}; "
                f"valid arguments: {', '.join(valid) or 'none'}"
            )


def rollout_urls(config: Any) -> list[str]:
    """The inference servers of the http engine: the run field `rollout_urls`, split at commas."""
    return [url.strip() for url in config.rollout_urls.split(",") if url.strip()]
