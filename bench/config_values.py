"""Values of the command line and of config files: `--set KEY=VALUE` and TOML parsing, the
conversion of a value to a config field's type, and did-you-mean hints. Standard library only,
so that a bad value is answered before torch is imported."""

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
        except (TypeError, ValueError):
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


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a run config file: TOML (`[algo]` and `[task]` tables become algo_args/task_args) or
    JSON (a run's config.json, so `--config runs/x/config.json` repeats a run's settings)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--config: file not found: {path}")
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise UsageError(f"--config {path}: invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"--config {path}: expected a JSON object of config fields")
        return data
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"--config {path}: invalid TOML: {exc}") from None
    for section in ("algo", "task"):
        if isinstance(data.get(section), dict):
            data[f"{section}_args"] = data.pop(section)
    return data
