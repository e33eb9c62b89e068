"""The task registry: an explicit table of built-in tasks, imported only when asked for.

`TASKS` maps a task name to "module:Class"; nothing is imported until `get_task` or
`available_tasks` is called, so `import envs.registry` stays cheap.
"""

from __future__ import annotations

import difflib
import importlib

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
    """Raised by `get_task` for a name not in `TASKS`; the message suggests close names."""


def _load(name: str) -> type[Task]:
    """Import and return the task class registered under `name`."""
    module_name, _, class_name = TASKS[name].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if cls.name != name:
        raise RuntimeError(f"TASKS[{name!r}] points to {TASKS[name]} whose name is {cls.name!r}")
    return cls


def available_tasks() -> dict[str, str]:
    """Registered task names -> one-line summaries (imports every task module)."""
    return {name: _load(name).summary for name in sorted(TASKS)}


def get_task_class(name: str) -> type[Task]:
    """The task class registered under `name`.

    Raises UnknownTaskError: "unknown task 'X'; did you mean 'Y'? available: a, b".
    """
    if name not in TASKS:
        close = difflib.get_close_matches(name, list(TASKS), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ";"
        raise UnknownTaskError(f"unknown task '{name}'{hint} available: {', '.join(sorted(TASKS))}")
    return _load(name)


def get_task(name: str, **kwargs) -> Task:
    """An instance of the task `name`, constructed with `kwargs` (bad kwargs or values -> UnknownTaskError)."""
    cls = get_task_class(name)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        message = str(exc)
        if not message.startswith(f"task {name!r}"):
            message = f"task {name!r}: {message}"
        raise UnknownTaskError(message) from None


def describe_tasks() -> list[dict[str, str]]:
    """What `bench tasks` shows: name, one-line summary and default runtime of every task."""
    return [
        {"name": name, "summary": cls.summary, "default_runtime": cls.default_runtime}
        for name, cls in ((n, _load(n)) for n in TASKS)
    ]
