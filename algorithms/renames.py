"""Old names of algorithm config fields, read as their new ones with one warning each.

An algorithm lists the fields it renamed in its `renamed_fields` class attribute, both sides
spelt as `--set` spells them: `{"algo.eps_high": "algo.clip_eps_high"}` (a field renamed) or
`{"algo.critic_lr": "critic_lr"}` (a field that moved to the run config). Every reader of
algorithm fields passes them through `current_key` (one key) or `split_algo_args` (an
`algo_args` table): the run config's layers (`--set`, `--config` TOML and config.json files,
arms files, sweep parameters, a resumed run's saved config), `--space` files, and the
parameters of sweep studies stored before a rename. Standard library only.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from algorithms.deprecation import warn_once


def current_key(cls: type, key: str) -> str:
    """The `--set` key that holds `key` now for algorithm class `cls`: `key` itself, or its new
    name from `cls.renamed_fields`, with one warning per (algorithm, old name)."""
    new = getattr(cls, "renamed_fields", {}).get(key)
    if new is None:
        return key
    where = new if new.startswith("algo.") else f"the run field {new}"
    warn_once(
        ("renamed", cls.name, key),
        f"{cls.name}: {key} is now {where}; the old name is read as that for now (rename it where it is set)",
    )
    return new


def split_algo_args(cls: type, algo_args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(`algo_args` under the current field names, the run fields that old algorithm fields moved
    to). ValueError when one field is given under its old and its new name."""
    fields: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for name, value in algo_args.items():
        key = current_key(cls, f"algo.{name}")
        section, dot, field = key.partition(".")
        target, target_name = (fields, field) if dot and section == "algo" else (run, key)
        if target_name in target:
            raise ValueError(f"algo.{name} and {key} are two names of one field of {cls.name}; give one")
        target[target_name] = value
    return fields, run


def current_record(cls: type, algo_config: dict[str, Any]) -> dict[str, Any]:
    """A recorded effective config (config.json's `algo_config`) under the current field names,
    without the fields that moved to the run config (the record of a setting is not a setting)."""
    return {
        key.removeprefix("algo."): value
        for name, value in algo_config.items()
        if (key := current_key(cls, f"algo.{name}")).startswith("algo.")
    }


def check_renamed_fields(cls: type) -> list[str]:
    """Problems with `cls.renamed_fields` (empty when it is sound): each old name is an `algo.`
    key that no current field has; each new one is a current field (`algo.X`) or a run field."""
    renamed = getattr(cls, "renamed_fields", {})
    if not isinstance(renamed, dict):
        return [f"renamed_fields must be a dict of old -> new `--set` keys, got {type(renamed).__name__}"]
    current = {f.name for f in dataclasses.fields(cls.Config)}
    problems = []
    for old, new in renamed.items():
        section, _, field = str(old).partition(".")
        if section != "algo" or field in current:
            problems.append(f"renamed_fields: {old!r} must be 'algo.OLD' naming no current field")
        section, dot, field = str(new).partition(".")
        if dot and (section != "algo" or field not in current):
            problems.append(f"renamed_fields: {old!r} -> {new!r} names no field of {cls.name}'s Config")
    return problems
