"""The task registry: an explicit table of built-in tasks, imported only when asked for.

`TASKS` maps a task name to "module:Class", `FAMILIES` a prefix to the class of a family of tasks
(`rg:<dataset>`: any reasoning-gym dataset); nothing is imported until a class is asked for,
so `import envs.registry` stays cheap. The same vocabulary as the algorithm and benchmark
registries: `names()`, `get(name)` (the class), `describe(name)`; plus `make(name, **kwargs)`,
an instance with task arguments.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from typing import Any

from envs.base import Task

TASKS: dict[str, str] = {
    "arith": "envs.arith:ArithTask",
    "swe": "envs.swe.task:SweTask",
    "agent": "envs.agent:AgentTask",
    "drift": "envs.online:DriftTask",
    "math": "envs.math.tasks:MathTask",
}
"""Built-in tasks: name -> "module:Class" (the class is imported lazily)."""


FAMILIES: dict[str, str] = {"rg:": "envs.reasoning_gym:ReasoningGymTask"}
"""Task families named `<prefix><member>`: prefix -> "module:Class"; the class is specialised per
member (its `name` and `dataset`), which the class itself validates when built."""


class UnknownTaskError(ValueError):
    """An unknown task name or bad task arguments; the message suggests close names."""


def _family(name: str) -> str | None:
    """The family prefix of `name` with a non-empty member (`rg:` of `rg:chain_sum`), or None."""
    return next((p for p in FAMILIES if name.startswith(p) and len(name) > len(p)), None)


@functools.cache
def _member(prefix: str, name: str) -> type[Task]:
    """The subclass of a family's class for one member (one class per name, so it compares equal)."""
    module_name, _, class_name = FAMILIES[prefix].partition(":")
    base = getattr(importlib.import_module(module_name), class_name)
    return type(f"{class_name}[{name}]", (base,), {"name": name, "dataset": name[len(prefix) :]})


def _load(name: str) -> type[Task]:
    """Import and return the task class registered under `name` (a family member's own subclass)."""
    prefix = _family(name)
    if prefix is not None:
        return _member(prefix, name)
    module_name, _, class_name = TASKS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if cls.name != name:
        raise RuntimeError(f"TASKS[{name!r}] points to {TASKS[name]} whose name is {cls.name!r}")
    return cls


def names() -> list[str]:
    """Registered task names, sorted (imports nothing)."""
    return sorted(TASKS)


def check(name: str) -> None:
    """Raise UnknownTaskError for a name that is not registered (imports nothing):
    "unknown task 'X'; did you mean 'Y'? available: a, b"."""
    if name not in TASKS and _family(name) is None:
        close = difflib.get_close_matches(name, list(TASKS), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ";"
        families = ", ".join(f"{p}<name>" for p in FAMILIES)
        raise UnknownTaskError(f"unknown task '{name}'{hint} available: {', '.join(names())}, {families}")


def get(name: str) -> type[Task]:
    """The task class registered under `name` (UnknownTaskError with a did-you-mean otherwise)."""
    check(name)
    return _load(name)


def make(name: str, **kwargs: Any) -> Task:
    """An instance of the task `name`, constructed with `kwargs` (bad kwargs or values -> UnknownTaskError)."""
    cls = get(name)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        if not message.startswith(f"task {name!r}"):
            message = f"task {name!r}: {message}"
        raise UnknownTaskError(message) from None


def describe(name: str) -> dict[str, str]:
    """What `bench tasks` shows for one task: name, one-line summary and default runtime."""
    cls = get(name)
    return {"name": name, "summary": cls.summary, "default_runtime": cls.default_runtime}


def summaries() -> dict[str, str]:
    """Registered task names -> one-line summaries (imports every task module)."""
    return {name: get(name).summary for name in names()}


def describe_all() -> list[dict[str, str]]:
    """`describe` of every task, in registration order, then one row per family (`rg:<name>`)."""
    rows = [describe(name) for name in TASKS]
    for prefix, target in FAMILIES.items():
        module_name, _, class_name = target.partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        rows.append(
            {"name": f"{prefix}<name>", "summary": cls.summary, "default_runtime": cls.default_runtime}
        )
    return rows
