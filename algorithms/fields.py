"""Config fields with help text, shared by algorithm configs and the run config (torch-free, so
the command line can validate names and values before it imports torch)."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Any


def doc(
    text: str,
    *,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    repeat: bool = False,
    **kwargs: Any,
) -> Any:
    """A dataclass field whose help text is kept in metadata (shown by `bench algos NAME` and
    `bench run --help`); `flag` (with `choices`, `metavar`, and `repeat` for an option given
    several times) gives a run config or comparison/sweep spec field a command-line option of
    its own, derived from the field (`bench.commands.add_field_options`)."""
    metadata: dict[str, Any] = {"help": text}
    for key, value in (("flag", flag), ("choices", choices), ("metavar", metavar)):
        if value is not None:
            metadata[key] = value
    if repeat:
        metadata["repeat"] = True
    return field(metadata=metadata, **kwargs)


def describe_fields(config_cls: type) -> list[dict[str, Any]]:
    """Describe a config dataclass: name, type, default and help text of each field."""
    out = []
    for f in dataclasses.fields(config_cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        out.append(
            {"name": f.name, "type": type_name, "default": default, "help": f.metadata.get("help", "")}
        )
    return out
