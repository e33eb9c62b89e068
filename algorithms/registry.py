"""The algorithm registry: built-ins in an explicit lazily-loaded table, external plugins
through the `bench.algorithms` entry-point group or a module path (`--plugin`). The same
vocabulary as the task and benchmark registries: `names()`, `check(name)`, `get(name)`,
`describe(name)`.

Nothing here imports a plugin until it is asked for, so `import algorithms.registry` stays
cheap. Duplicate names are rejected; unknown names get "did you mean ...? available: ...".
One broken plugin never breaks the registry for the others: a plugin that cannot be imported
or fails its checks is a `RegistryError` when it is asked for, an entry point whose name is
taken is refused, and `problems()` lists each in one line (name, where it comes from, the error)
for `bench algos`.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # algorithms.base imports torch: only the loaders below need it
    from algorithms.base import Algorithm

ENTRY_POINT_GROUP = "bench.algorithms"

# name -> "module:Class". Order is the order `bench algos` lists them in.
BUILTINS: dict[str, str] = {
    "sao": "algorithms.sao:SAO",
    "grpo": "algorithms.grpo:GRPO",
    "dapo": "algorithms.dapo:DAPO",
    "ppo": "algorithms.ppo:PPO",
    "running-mean": "algorithms.running_mean:RunningMean",
    "dr-grpo": "algorithms.dr_grpo:DrGRPO",
    "gspo": "algorithms.gspo:GSPO",
    "rloo": "algorithms.rloo:RLOO",
}


class RegistryError(ValueError):
    """A registry problem a user can fix (unknown or duplicate name, bad plugin)."""


@dataclass
class _Entry:
    target: str  # "module:Class"
    source: str  # "built-in", "entry point (<dist>)", "plugin <module>"
    cls: type[Algorithm] | None = None
    dist: metadata.Distribution | None = None  # the installed distribution of an entry point
    error: str | None = None  # why it cannot be used, once known (then `cls` stays None)


_entries: dict[str, _Entry] | None = None
_clashes: list[tuple[str, _Entry]] = []  # entry points refused because their name was taken


def _load_target(target: str) -> type[Algorithm]:
    from algorithms.base import Algorithm

    module_name, _, attr = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except Exception as exc:  # a third-party import may raise anything; it breaks only itself
        raise RegistryError(f"cannot load {target}: {type(exc).__name__}: {exc}") from exc
    if not (inspect.isclass(cls) and issubclass(cls, Algorithm)):
        raise RegistryError(f"{target} is not an algorithms.base.Algorithm subclass")
    return cls


def _add(entries: dict[str, _Entry], name: str, entry: _Entry) -> None:
    if name in entries:
        raise RegistryError(
            f"duplicate algorithm name {name!r}: {entry.source} clashes with {entries[name].source}"
        )
    entries[name] = entry


def _table() -> dict[str, _Entry]:
    """The name table: built-ins, then installed entry points (loaded on first use). An entry
    point whose name is taken is refused (`problems()`); the first holder keeps the name."""
    global _entries
    if _entries is None:
        entries = {name: _Entry(target, "built-in") for name, target in BUILTINS.items()}
        _clashes.clear()
        for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            entry = _Entry(ep.value, f"entry point ({dist})", dist=ep.dist)
            try:
                _add(entries, ep.name, entry)
            except RegistryError as exc:
                entry.error = str(exc)
                _clashes.append((ep.name, entry))
        _entries = entries
    return _entries


def reset() -> None:
    """Forget loaded plugins and re-read entry points (tests and long-lived processes)."""
    global _entries
    _entries = None
    _clashes.clear()


def load_plugin_module(module_path: str) -> list[str]:
    """Import a user module (`--plugin my_pkg.my_algo`) and register every Algorithm
    subclass it defines. Returns the names registered."""
    from algorithms.base import Algorithm

    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        raise RegistryError(f"cannot import plugin module {module_path!r}: {exc}") from exc
    table = _table()
    found = []
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if issubclass(cls, Algorithm) and cls.__module__ == module.__name__ and hasattr(cls, "name"):
            existing = table.get(cls.name)
            if existing is not None and existing.cls is cls:
                continue  # the same class loaded twice (e.g. also an entry point) is not a clash
            _check_plugin(cls)
            _add(table, cls.name, _Entry(f"{module.__name__}:{cls.__name__}", f"plugin {module_path}", cls))
            found.append(cls.name)
    if not found:
        raise RegistryError(f"plugin module {module_path!r} defines no Algorithm subclass with a `name`")
    return found


def names() -> list[str]:
    """Every registered algorithm name."""
    return list(_table())


def check(name: str) -> None:
    """Raise RegistryError for a name that is not registered, without loading any plugin:
    "unknown algorithm 'x'; did you mean 'y'? available: a, b"."""
    table = _table()
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise RegistryError(
            f"unknown algorithm {name!r}; {hint}available: {', '.join(table)} (a plugin: pass --plugin MODULE, "
            "or install its package)"
        )


def get(name: str) -> type[Algorithm]:
    """The algorithm class registered under `name` (loaded now if it was not yet); a
    RegistryError naming the plugin, where it comes from and why when it cannot be used."""
    check(name)
    entry = _table()[name]
    if entry.cls is None and entry.error is None:
        try:
            cls = _load_target(entry.target)
            if getattr(cls, "name", None) != name:
                raise RegistryError(
                    f"{entry.target} declares name {getattr(cls, 'name', None)!r} but is registered as {name!r}"
                )
            _check_plugin(cls)
        except RegistryError as exc:
            entry.error = str(exc)
        else:
            entry.cls = cls
    if entry.error is not None:
        raise RegistryError(f"algorithm {name!r} from {entry.source} cannot be used: {entry.error}")
    return entry.cls


def problems() -> list[str]:
    """One line for every registered plugin that cannot be used (loading each one not loaded
    yet): its name, where it comes from (entry point and distribution, plugin module) and the
    error; then the entry points refused because their name was taken (`refused`)."""
    found = []
    for name in _table():
        try:
            get(name)
        except RegistryError as exc:
            found.append(str(exc))
    return found + refused()


def refused() -> list[str]:
    """One line for each installed entry point refused because its name was already taken."""
    _table()
    return [f"algorithm {name!r} from {entry.source} refused: {entry.error}" for name, entry in _clashes]


def needs_by_preset(cls: type[Algorithm]) -> dict[str, list[str]]:
    """The optional inputs `cls` needs with its defaults ("default") and with each preset."""
    configs = {"default": cls.Config(), **{p: cls.make_config(p) for p in cls.presets}}
    return {label: sorted(cls(config).needs) for label, config in configs.items()}


def _check_plugin(cls: type[Algorithm]) -> None:
    """What the registry checks when it loads a plugin: its needs per preset and its table of
    renamed fields; a RegistryError for anything the plugin's own code raises."""
    from algorithms.renames import check_renamed_fields

    check_needs(cls)
    try:
        unsound = check_renamed_fields(cls)
    except Exception as exc:
        raise RegistryError(f"algorithm {cls.name!r}: {type(exc).__name__}: {exc}") from None
    if unsound:
        raise RegistryError(f"algorithm {cls.name!r}: {'; '.join(unsound)}")


def check_needs(cls: type[Algorithm]) -> None:
    """RegistryError unless every preset of `cls` needs only inputs the loop can supply."""
    from algorithms.base import OPTIONAL_INPUTS

    try:
        by_preset = needs_by_preset(cls)
    except (TypeError, ValueError) as exc:
        raise RegistryError(
            f"algorithm {cls.name!r}: its default config or a preset is invalid: {exc}"
        ) from None
    except Exception as exc:  # the plugin's own code failed (e.g. in __init__ or `needs`)
        raise RegistryError(
            f"algorithm {cls.name!r}: building it with its default config or a preset raised "
            f"{type(exc).__name__}: {exc}"
        ) from None
    for label, needs in by_preset.items():
        unknown = sorted(set(needs) - OPTIONAL_INPUTS)
        if unknown:
            raise RegistryError(
                f"algorithm {cls.name!r} ({label}) needs {', '.join(unknown)}, which the loop cannot supply; "
                f"valid optional inputs: {', '.join(sorted(OPTIONAL_INPUTS))}"
            )


def provenance(name: str) -> dict[str, str | None]:
    """Where algorithm `name` comes from, as config.json records it: its source ("built-in",
    "entry point (dist)", "plugin MODULE"), class ("module:Class"), module, and for code outside
    this project the distribution that provides it and its version (None when it is a loose file)."""
    cls, entry = get(name), _table()[name]
    dist = version = None
    if entry.dist is not None:
        dist, version = entry.dist.name, entry.dist.version
    elif entry.source != "built-in":  # a --plugin module: from an installed package, or a loose file
        dist = next(iter(metadata.packages_distributions().get(cls.__module__.split(".")[0], [])), None)
        try:
            version = metadata.version(dist) if dist else None
        except metadata.PackageNotFoundError:
            version = None
    return {
        "source": entry.source,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "module": cls.__module__,
        "distribution": dist,
        "version": version,
    }


def paper_of(cls: type[Algorithm]) -> str:
    """The paper an algorithm implements: its `paper` attribute, else the "Paper:" paragraph of
    its module's docstring, else ""."""
    if getattr(cls, "paper", ""):
        return cls.paper
    doc = inspect.getdoc(importlib.import_module(cls.__module__)) or ""
    for paragraph in doc.split("\n\n"):
        if paragraph.lstrip().startswith(("Paper:", "Papers:")):
            return " ".join(paragraph.split(":", 1)[1].split())
    return ""


def describe(name: str) -> dict:
    """What `bench algos` shows for one algorithm: the list's columns, and for `bench algos NAME`
    its paper, config fields and, per preset, what the preset changes and what the algorithm then
    needs, its group size and its critic settings."""
    import dataclasses

    from algorithms.fields import RunSettings, describe_fields

    cls = get(name)
    try:
        algo = cls()
        configs = {"default": cls.Config(), **{p: cls.make_config(p) for p in cls.presets}}
        per_preset = {}
        for label, config in configs.items():
            configured = cls(config)
            critic = configured.critic
            per_preset[label] = {
                "changes": {} if label == "default" else dict(cls.presets[label]),
                "needs": sorted(configured.needs),
                "rollouts_per_prompt": configured.group_size,
                "critic": None if critic is None else dataclasses.asdict(critic),
                # fields that cannot act at the default one policy update per batch
                "inactive": sorted(configured.inactive_fields(RunSettings())),
            }
        critic, group_size, needs = algo.critic is not None, algo.group_size, sorted(algo.needs)
    except Exception as exc:  # the plugin's own code: it breaks only its own row
        raise RegistryError(
            f"algorithm {name!r} from {_table()[name].source} cannot be described: {type(exc).__name__}: {exc}"
        ) from None
    return {
        "name": name,
        "summary": cls.summary,
        "paper": paper_of(cls),
        "rollouts_per_prompt": group_size,
        "critic": critic,
        "needs": needs,
        "needs_by_preset": {label: d["needs"] for label, d in per_preset.items()},
        "presets": sorted(cls.presets),
        "source": _table()[name].source,
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "fields": describe_fields(cls.Config),
        "renamed_fields": dict(getattr(cls, "renamed_fields", {})),
        "by_preset": per_preset,
    }
