"""Config fields with help text, shared by algorithm configs and the run config (torch-free, so
the command line can validate names and values before it imports torch)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunSettings:
    """What an algorithm's parameters may depend on beyond its own config: the run's settings
    that decide whether a parameter can act at all."""

    updates_per_batch: int = 1
    """policy optimizer updates per batch of trajectories (the run field `minibatches`)"""


@dataclass(frozen=True)
class ActsWhen:
    """When a config field can change training (`doc(..., acts_when=...)`): `test(config, run)`
    says whether it can under an effective config and `RunSettings`; `words` say when, for
    `bench algos NAME` and the sweeps' messages. A field that cannot act under a run's settings is
    neither searched by a sweep nor shown among tuned parameters (`Algorithm.inactive_fields`)."""

    test: Callable[[Any, RunSettings], bool]
    words: str


MULTIPLE_UPDATES = ActsWhen(
    lambda config, run: run.updates_per_batch > 1,
    "acts only with more than one policy update per batch (minibatches > 1): with one, the ratio "
    "to the old policy is exactly 1 and the clip never binds",
)
"""The PPO clip of a ratio against the old policy (the learner before this batch's updates)."""


def doc(
    text: str,
    *,
    flag: str | None = None,
    choices: tuple[str, ...] | None = None,
    metavar: str | None = None,
    repeat: bool = False,
    acts_when: ActsWhen | None = None,
    **kwargs: Any,
) -> Any:
    """A dataclass field whose help text is kept in metadata (shown by `bench algos NAME` and
    `bench run --help`); `flag` (with `choices`, `metavar`, and `repeat` for an option given
    several times) gives a run config or comparison/sweep spec field a command-line option of
    its own, derived from the field (`bench.commands.add_field_options`); `acts_when` says when an
    algorithm field can change training at all (`ActsWhen`; None: always)."""
    metadata: dict[str, Any] = {"help": text}
    for key, value in (("flag", flag), ("choices", choices), ("metavar", metavar), ("acts_when", acts_when)):
        if value is not None:
            metadata[key] = value
    if repeat:
        metadata["repeat"] = True
    return field(metadata=metadata, **kwargs)


def describe_fields(config_cls: type) -> list[dict[str, Any]]:
    """Describe a config dataclass: name, type, default and help text of each field, and when it
    can act (`acts_when`: the words of its `ActsWhen`, or "always")."""
    out = []
    for f in dataclasses.fields(config_cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        acts = f.metadata.get("acts_when")
        out.append(
            {
                "name": f.name,
                "type": type_name,
                "default": default,
                "help": f.metadata.get("help", ""),
                "acts_when": "always" if acts is None else acts.words,
            }
        )
    return out
