"""The benchmark registry: an explicit table of built-in benchmarks, imported only when asked for.

`BENCHMARKS` maps a name to "module:factory"; `get` imports the module and calls the factory
(once; specs are immutable), so `import benchmarks.registry` stays cheap and a benchmark whose
data is unreachable costs nothing until it is loaded. The same vocabulary as the algorithm and
task registries: `names()`, `get(name)`, `describe(name)`.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import json
from typing import Any, NamedTuple

from benchmarks.base import BenchmarkSpec

BENCHMARKS: dict[str, str] = {
    "imo-answerbench": "benchmarks.math_sets:imo_answerbench",
    "beyond-aime": "benchmarks.math_sets:beyond_aime",
    "aime25": "benchmarks.math_sets:aime25",
    "gsm8k": "benchmarks.math_sets:gsm8k",
    "swe-verified": "benchmarks.swe_verified:swe_verified",
    "arith": "benchmarks.embedded:arith",
    "arith-val": "benchmarks.embedded:arith_val",
    "agent": "benchmarks.embedded:agent",
    "agent-val": "benchmarks.embedded:agent_val",
    "swe-mini": "benchmarks.swe_mini:swe_mini",
    "swe-synth": "benchmarks.swe_mini:swe_synth",
    "rg:basic_arithmetic": "benchmarks.reasoning_gym:basic_arithmetic",
    "rg:chain_sum": "benchmarks.reasoning_gym:chain_sum",
    "rg:leg_counting": "benchmarks.reasoning_gym:leg_counting",
}
"""Built-in benchmarks: name -> "module:factory" (the factory returns a `BenchmarkSpec`)."""

CONFIGURED: dict[str, str] = {
    "rg:": "benchmarks.reasoning_gym:configured",
    "arith": "benchmarks.embedded:configured_arith",
    "arith-val": "benchmarks.embedded:configured_arith",
}
"""Benchmarks built from a config name (`envs.config_names`): a task's held-out problems at the
config its name writes out, `arith@grading=last-number@max_operands=3` or
`rg:chain_sum@max_digits=1@max_terms=2` (and `rg:<dataset>` alone: any reasoning-gym dataset).
Base name (a prefix ending in `:` stands for a family) -> "module:builder", the builder taking
the name, checking it and returning its spec. `names()` lists the registered ones only."""


class OwnData(NamedTuple):
    """An own-data benchmark: the rows its `task` holds out of a run's dataset."""

    task: str
    builder: str
    """"module:builder": the builder takes the task's arguments and returns the spec."""
    describer: str
    """"module:function": what `bench benchmarks` lists for it, given its name (nothing loaded)."""
    needs: str | None = None
    """A task argument that must be set (non-zero) for these rows to exist, else None."""

    def held_out_by(self, task_args: dict[str, Any] | None) -> bool:
        """Whether a task built with `task_args` holds these rows out."""
        return self.needs is None or bool((task_args or {}).get(self.needs))


OWN_DATA: dict[str, OwnData] = {
    "math": OwnData("math", "benchmarks.own_data:math_held_out", "benchmarks.own_data:math_description"),
    "math-val": OwnData(
        "math",
        "benchmarks.own_data:math_validation",
        "benchmarks.own_data:math_description",
        needs="validation_fraction",
    ),
}
"""Benchmarks of a run's own data, built from its task's arguments (`get(name, task_args)`): a
math run's own benchmark is `math` (`task_benchmark_name`), its validation split `math-val`
where it holds one out (`task_validation_name`: a sweep's default objective)."""
CONFIGURED_FORMS = ("arith[-val]@field=value...", "rg:<dataset>[@field=value...]")
"""How `check`'s message and `bench benchmarks` show the names `CONFIGURED` builds."""


class UnknownBenchmarkError(ValueError):
    """Raised by `get` for a name not in `BENCHMARKS`; the message suggests close names."""


def names() -> list[str]:
    """Registered benchmark names, sorted (imports nothing). The own-data benchmarks (`OWN_DATA`)
    are not among them: their rows are a run's, held out from its training but not a tuning
    split, so a sweep's objective cannot name them."""
    return sorted(BENCHMARKS)


def _builder(name: str) -> str | None:
    """The `CONFIGURED` builder of a name not in BENCHMARKS, or None (nothing imported)."""
    if name in BENCHMARKS or name in OWN_DATA:
        return None
    base = name.split("@", 1)[0]
    for key, target in CONFIGURED.items():
        family = key.endswith(":") and base.startswith(key) and len(base) > len(key)
        if family or (base == key and base != name):
            return target
    return None


@functools.cache
def _build(name: str) -> BenchmarkSpec:
    """Import the factory registered under `name` (or the family's) and build the spec."""
    module_name, _, factory = (_builder(name) or BENCHMARKS[name]).partition(":")
    if name not in BENCHMARKS:
        return getattr(importlib.import_module(module_name), factory)(name)
    spec = getattr(importlib.import_module(module_name), factory)()
    if spec.name != name:
        raise RuntimeError(f"BENCHMARKS[{name!r}] points to {BENCHMARKS[name]} whose name is {spec.name!r}")
    return spec


def task_benchmark_name(task: str, task_args: dict[str, Any] | None = None) -> str | None:
    """The benchmark of a task's own held-out problems under `task_args` (`Task.benchmark_name`:
    most tasks share their benchmark's name, the swe task's is its dataset's, a configured arith
    or reasoning-gym task's is its config name, `CONFIGURED`), or None where it has none or the
    task is unknown (the caller's checks name that error)."""
    from envs import registry as task_registry

    try:
        task_registry.check(task)
    except task_registry.UnknownTaskError:
        return None
    name = task_registry.get(task).benchmark_name(task_args or {})
    if name in BENCHMARKS or name in OWN_DATA:
        return name
    try:
        check(name)
    except UnknownBenchmarkError:
        return None
    return name


def task_validation_name(task: str, task_args: dict[str, Any] | None = None) -> str | None:
    """The validation split of the task's own benchmark, for tuning (`arith-val`,
    `arith-val@max_operands=3` for `arith@max_operands=3`), or None where it has none."""
    own = task_benchmark_name(task, task_args)
    if own is None:
        return None
    base, mark, config = own.partition("@")
    name = f"{base}-val{mark}{config}"
    if name in OWN_DATA:  # an own-data task holds out a validation split only when asked to
        return name if OWN_DATA[name].held_out_by(task_args) else None
    try:
        check(name)
    except UnknownBenchmarkError:
        return None
    return name


def check(name: str) -> None:
    """Raise UnknownBenchmarkError for a name that is not registered: "unknown benchmark 'x'; did
    you mean 'y'? available: a, b". Imports nothing, except for a config name (`CONFIGURED`),
    whose spec is built to check it (a reasoning-gym one imports reasoning-gym: seconds)."""
    if _builder(name) is not None:
        try:
            _build(name)
        except ValueError as exc:  # a bad form, field or value: the task's or the name's message
            raise UnknownBenchmarkError(f"benchmark '{name}': {exc}") from None
        return
    if name not in BENCHMARKS and name not in OWN_DATA:
        known = names() + list(OWN_DATA)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ";"
        raise UnknownBenchmarkError(
            f"unknown benchmark '{name}'{hint} available: {', '.join(sorted(known) + list(CONFIGURED_FORMS))}"
        )


def check_own_data(name: str, task: str, task_args: dict[str, Any] | None = None) -> None:
    """UnknownBenchmarkError when `name` is an own-data benchmark (`OWN_DATA`) that a `task` run
    built with `task_args` has not got: it is another task's, or its rows are held out only
    when an argument is set (`math-val`: task.validation_fraction)."""
    own = OWN_DATA.get(name)
    if own is None:
        return
    if own.task != task:
        raise UnknownBenchmarkError(
            f"benchmark '{name}' is the held-out rows of a {own.task} task's dataset; this run's task is "
            f"{task} (evaluate a {own.task} run's data, or name another benchmark)"
        )
    if not own.held_out_by(task_args):
        raise UnknownBenchmarkError(
            f"benchmark '{name}': a {task} run holds these rows out only with task.{own.needs} set "
            f"(e.g. --set task.{own.needs}=0.1)"
        )


def get(name: str, task_args: dict[str, Any] | None = None) -> BenchmarkSpec:
    """The spec registered under `name` (UnknownBenchmarkError with a did-you-mean otherwise).
    An own-data benchmark (`OWN_DATA`) is built from `task_args`, the arguments of the task of
    its name (a run's `task_args`); without them it is UnknownBenchmarkError saying where its
    data comes from. Other benchmarks ignore `task_args`."""
    check(name)
    if name not in OWN_DATA:
        return _build(name)
    if not task_args:
        raise UnknownBenchmarkError(
            f"benchmark '{name}' is the held-out rows of a {OWN_DATA[name].task} task's dataset: evaluate "
            f"a run trained on one (bench eval --model RUN_DIR --bench {name}) or name the data (--data SOURCE)"
        )
    return _own_data(name, json.dumps(task_args, sort_keys=True, default=str))


@functools.lru_cache(maxsize=8)
def _own_data(name: str, task_args_json: str) -> BenchmarkSpec:
    """The own-data spec `name` built from the task arguments `task_args_json` (JSON, keys
    sorted), once per process and arguments: a run evaluates its held-out rows every
    `eval_every` steps, and building the spec reads the user's dataset (seconds for a large
    one). The dataset is read as it was at the first build, as the run's training task read it."""
    return _call(OWN_DATA[name].builder, json.loads(task_args_json))


def _call(target: str, argument: Any) -> Any:
    """Import "module:function" and call the function with `argument`."""
    module_name, _, function = target.partition(":")
    return getattr(importlib.import_module(module_name), function)(argument)


def describe(name: str) -> dict[str, Any]:
    """What `bench benchmarks` shows for one benchmark: name, version, description, source,
    license, default sampling, whether it is multi-turn (an own-data benchmark: its general
    form, nothing loaded)."""
    if name in OWN_DATA:
        return _call(OWN_DATA[name].describer, name)
    spec = get(name)
    return {
        "name": spec.name,
        "version": spec.version,
        "description": spec.description,
        "source": spec.source.describe(),
        "license": spec.license,
        "sampling": spec.sampling.as_dict(),
        "turns": "multi" if spec.episode_task is not None else "single",
    }


def describe_all() -> list[dict[str, Any]]:
    """`describe` of every registered benchmark, sorted by name, then one row per config form
    (`CONFIGURED`), shown as one of its members."""
    rows = [describe(name) for name in sorted(names() + list(OWN_DATA))]
    for form, example, what in (
        ("arith@field=value...", "arith@grading=last-number@max_operands=3", "the arith task"),
        (
            "rg:<dataset>[@field=value...]",
            "rg:chain_sum@max_digits=1@max_terms=2",
            "any reasoning-gym dataset",
        ),
    ):
        member = describe(example)
        member.update(
            name=form,
            description=f"{what} at the config its name writes out (fields sorted; e.g. {example}): "
            "that config's held-out problems, disjoint from training",
        )
        rows.append(member)
    return rows
