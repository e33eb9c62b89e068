"""The task registry: an explicit table of built-in tasks, imported only when asked for.

`TASKS` maps a task name to "module:Class"; nothing is imported until a class is asked for,
so `import envs.registry` stays cheap. The same vocabulary as the algorithm and benchmark
registries: `names()`, `get(name)` (the class), `describe(name)`; plus `make(name, **kwargs)`,
an instance with task arguments.
"""

from __future__ import annotations

import difflib
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


class UnknownTaskError(ValueError):
    """An unknown task name or bad task arguments; the message suggests close names."""


def _load(name: str) -> type[Task]:
    """Import and return the task class registered under `name`."""
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
    if name not in TASKS:
        close = difflib.get_close_matches(name, list(TASKS), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ";"
        raise UnknownTaskError(f"unknown task '{name}'{hint} available: {', '.join(names())}")


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
    """`describe` of every task, in registration order."""
    return [describe(name) for name in TASKS]
