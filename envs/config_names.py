"""Names of a task's config: `<base>@field=value@field=value`, the fields sorted.

A generated task at a config other than its default has held-out problems of its own, and its
benchmark is named after that config (`arith@grading=last-number@max_operands=3`,
`rg:chain_sum@max_digits=1@max_terms=2`): the name says what was evaluated, reads back as the
config, and is a file name (`evals/<name>.jsonl`). Values are TOML scalars written plainly
(numbers, `true`/`false`, words of letters, digits and `_.+-`); a list or a spaced string
cannot be written and leaves the config without a name.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

CONFIG_MARK = "@"
"""Separates the base name and each `field=value` in a config name."""
_WORD = re.compile(r"[A-Za-z0-9_.+-]+")


class ConfigNameError(ValueError):
    """A name that is not `<base>@field=value...` in canonical (sorted) form."""


def _parse_scalar(text: str) -> Any:
    """A value of a name: a TOML scalar (int, float, bool), else the word itself."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    return value if isinstance(value, (bool, int, float)) else text


def _format_scalar(value: Any) -> str | None:
    """`value` as written in a name (read back as itself, type included), or None."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (int, float)):
        text = repr(value)
    elif isinstance(value, str) and _WORD.fullmatch(value):
        text = value
    else:
        return None
    back = _parse_scalar(text)
    return text if back == value and type(back) is type(value) else None


def config_name(base: str, config: dict[str, Any]) -> str | None:
    """`base` at `config` (`base` alone for an empty config; fields sorted), or None where a
    value cannot be written in a name."""
    parts = [base]
    for key in sorted(config):
        text = _format_scalar(config[key])
        if text is None:
            return None
        parts.append(f"{key}={text}")
    return CONFIG_MARK.join(parts)


def describe_config(config: dict[str, Any]) -> str:
    """`config` for a description: `field=value, ...`, the fields sorted ("" when empty)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(config.items()))


def parse_config_name(name: str) -> tuple[str, dict[str, Any]]:
    """(base, config) of `<base>@field=value...`; ConfigNameError for a setting not written as
    `@field=value` once, or fields out of `config_name`'s order (the message gives that form)."""
    base, *settings = name.split(CONFIG_MARK)
    config: dict[str, Any] = {}
    for setting in settings:
        key, eq, text = setting.partition("=")
        if not (key and eq and text) or key in config:
            raise ConfigNameError(f"{name!r}: write each setting once as @field=value (e.g. {base}@field=2)")
        config[key] = _parse_scalar(text)
    canonical = config_name(base, config)
    if not base or canonical != name:
        hint = f"; write it as {canonical}" if base and canonical else ""
        raise ConfigNameError(f"{name!r} is not a canonical config name (fields sorted){hint}")
    return base, config
