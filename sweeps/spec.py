"""What comparisons and sweeps share: arms, a matched budget, seeds, the settings every run
gets, the config layers of one run, and the spec file (`comparison.json`, `sweep.json`) with the
fingerprint that tells one experiment from another.

An *arm* is an algorithm with an optional preset and overrides. On the command line arms are
a comma list: `sao`, `ppo:vapo` (algorithm `ppo`, preset `vapo`), `grpo+dis` (the paper's
name for GRPO with the DIS objective: algorithm `grpo`, preset `dis`); or a TOML file:

    [arms.sao-k1]                 # the arm's name, as reports show it
    algo = "sao"
    preset = "single-critic-update"   # optional
    algo_args = { dis_eps_high = 4.0 }   # optional: algorithm fields (as --set algo.X)
    set = { policy_lr = 5e-5 }        # optional: run fields for this arm only (reported)

Every arm shares the task, model (and so the base checkpoint), learning-rate rule,
trajectories per step, sampling settings, seeds, budget and evaluation: they come from the
experiment's shared settings (`--set`, `--mode`, ...) and the arm cannot change them unless
its TOML `set` says so, which the report lists.

A spec produces config *layers* (`run_layers`), never a run config: the `bench` command
validates them (`bench.config.build_run`) before anything runs, and each run's `bench run`
child builds its config from them. So this package needs nothing from `bench`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from algorithms.fields import doc
from results.budgets import BudgetKind, budget_help, budget_of, check_amount, matched_budgets
from results.experiments import arm_slug
from results.files import read_json, write_json_atomic
from sweeps.errors import ExperimentError

ALIASES = {"grpo+dis": ("grpo", "dis")}
"""Paper names of arms that are an algorithm with a preset."""

SHARED_BY_EVERY_ARM = frozenset({"minibatches"})
"""Run fields an arm's `set` may not change: the policy updates per batch is a setting of the
whole experiment (whether a PPO clip can act depends on it), stated in its report."""


@dataclass(frozen=True)
class Arm:
    """One algorithm setting of a comparison or sweep."""

    name: str
    algo: str
    preset: str | None = None
    algo_args: dict[str, Any] = field(default_factory=dict)
    run_args: dict[str, Any] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        """The arm's name as a directory name (`ppo:vapo` -> `ppo_vapo`)."""
        return arm_slug(self.name)

    def config_layer(self) -> dict[str, Any]:
        """The arm's part of a run config (a config layer)."""
        layer: dict[str, Any] = {"algo": self.algo, **self.run_args}
        if self.preset is not None:
            layer["algo_preset"] = self.preset
        if self.algo_args:
            layer["algo_args"] = dict(self.algo_args)
        return layer


class Budget(NamedTuple):
    """The budget every run of an experiment stops at (`--budget KIND=N`)."""

    kind: BudgetKind
    amount: float

    def layer(self) -> dict[str, Any]:
        """The run config layer that enforces it: its limit, and no step limit."""
        return {budget_of(self.kind).field: self.amount, "steps": None}


def parse_arms(text: str) -> list[Arm]:
    """Arms from `--algos`: a comma list (module docstring) or the path of a TOML file of arms."""
    if text.endswith(".toml"):
        return _arms_from_toml(Path(text))
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ExperimentError("--algos needs at least one algorithm, e.g. --algos sao,grpo")
    arms = []
    for name in names:
        algo, preset = ALIASES.get(name, (None, None))
        if algo is None:
            algo, _, preset = name.partition(":")
            preset = preset or None
        arms.append(Arm(name=name, algo=algo, preset=preset))
    _check_unique(arms)
    return arms


def _arms_from_toml(path: Path) -> list[Arm]:
    if not path.is_file():
        raise ExperimentError(f"--algos {path}: file not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ExperimentError(f"--algos {path}: invalid TOML: {exc}") from None
    tables = data.get("arms")
    if not isinstance(tables, dict) or not tables:
        raise ExperimentError(f"--algos {path}: no [arms.NAME] tables")
    arms = []
    for name, table in tables.items():
        unknown = sorted(set(table) - {"algo", "preset", "algo_args", "set"})
        if unknown or "algo" not in table:
            raise ExperimentError(
                f"--algos {path}: arm {name!r} needs 'algo' and may have 'preset', 'algo_args', 'set'"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        run_args = dict(table.get("set", {}))
        if "algo" in run_args or "algo_preset" in run_args:
            raise ExperimentError(
                f"--algos {path}: arm {name!r}: give 'algo' and 'preset' as keys, not in 'set'"
            )
        if SHARED_BY_EVERY_ARM & set(run_args):
            raise ExperimentError(
                f"--algos {path}: arm {name!r}: minibatches (policy updates per batch) is shared by every arm "
                "of an experiment: set it for all with --set minibatches=N"
            )
        arms.append(Arm(name, table["algo"], table.get("preset"), dict(table.get("algo_args", {})), run_args))
    _check_unique(arms)
    return arms


def _check_unique(arms: list[Arm]) -> None:
    slugs = [a.slug for a in arms]
    duplicated = sorted({s for s in slugs if slugs.count(s) > 1})
    if duplicated:
        raise ExperimentError(f"--algos names the arm {duplicated[0]!r} twice")


def parse_budget(text: str) -> Budget:
    """`trajectories=1280` -> Budget("trajectories", 1280), `flops=3.2e16` -> Budget("flops",
    32000000000000000) (scientific notation read exactly: whole kinds stay whole); one line naming
    the valid kinds (the matched kinds of `results.budgets.BUDGETS`) otherwise."""
    kind, sep, value = text.partition("=")
    rows = {str(row.kind): row for row in matched_budgets()}
    if not sep or kind not in rows:
        raise ExperimentError(f"--budget {text!r}: expected one of {budget_help(units=False)}")
    try:
        amount = Decimal(value.strip())
    except InvalidOperation:
        raise ExperimentError(f"--budget {text!r}: {value!r} is not a number") from None
    if not amount.is_finite():  # Decimal reads "nan" and "inf" too
        raise ExperimentError(f"--budget {text!r}: must be a finite number")
    problem = check_amount(f"--budget {text!r}", amount, kind)
    if problem is not None:
        raise ExperimentError(problem)
    row = rows[kind]
    if row.whole and amount != amount.to_integral_value():
        raise ExperimentError(f"--budget {text!r}: {kind} must be a whole number")
    return Budget(row.kind, int(amount) if row.whole else float(amount))


def parse_seeds(text: str) -> tuple[int, ...]:
    """`--seeds`: N means seeds 0..N-1, or a comma list of distinct integers."""
    try:
        values = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ExperimentError(f"--seeds {text!r}: expected N or a comma list of integers") from None
    if len(values) == 1 and "," not in text:
        if values[0] < 1:
            raise ExperimentError(f"--seeds must be >= 1, got {values[0]}")
        return tuple(range(values[0]))
    if not values or len(set(values)) != len(values):
        raise ExperimentError(f"--seeds {text!r}: expected distinct integers")
    return tuple(values)


@dataclass(frozen=True, kw_only=True)
class ExperimentSpec:
    """What every comparison and sweep defines (its spec file; `fingerprint` hashes it whole).
    Subclasses add their fields and name their file; the fields with a flag are the command's
    options (`bench.commands.add_field_options`)."""

    SPEC_FILE: ClassVar[str]
    FINGERPRINT_CHARS: ClassVar[int]
    NOUN: ClassVar[str]  # "comparison" or "sweep", for messages
    SEEDS_EXTEND: ClassVar[bool] = False  # whether more seeds may join a saved experiment (`seeds_added_to`)

    arms: tuple[Arm, ...] = doc(
        "comma-separated arms: an algorithm, ALGO:PRESET (e.g. ppo:vapo) or grpo+dis; or a TOML file of "
        "[arms.NAME] tables (algo, preset, algo_args, set)",
        flag="--algos",
        metavar="ARMS",
    )
    task: str = doc("the task every run trains on", flag="--task", default="arith")
    seeds: tuple[int, ...] = doc(
        "seeds of every arm: N means 0..N-1, or a comma list",
        flag="--seeds",
        metavar="N|S,S,...",
        default=(0,),
    )
    budget: Budget = doc(f"the budget every run stops at: {budget_help()}", flag="--budget", metavar="KIND=N")
    shared: dict[str, Any] = doc(
        "a run config field for every run (as bench run --set); repeatable",
        flag="--set",
        metavar="KEY=VALUE",
        repeat=True,
        default_factory=dict,
    )

    def __post_init__(self) -> None:
        kind, amount = self.budget  # a (kind, amount) pair, as the spec file and callers may give it
        object.__setattr__(self, "budget", Budget(BudgetKind(kind), amount))

    def updates_per_batch(self) -> int:
        """Policy optimizer updates per batch of every run (`--set minibatches=N`, default 1)."""
        return int(self.shared.get("minibatches", 1))

    def run_layers(
        self, arm: Arm, seed: int, evals: dict[str, Any], *extra: dict[str, Any]
    ) -> list[dict[str, Any]]:
        """The config layers of one run, lowest first (`bench.config.build_run` merges them):
        task and seed, the shared settings, the budget, `evals`, the arm, then `extra`."""
        return [
            {"task": self.task, "seed": seed},
            dict(self.shared),
            self.budget.layer(),
            evals,
            arm.config_layer(),
            *extra,
        ]

    def to_json(self) -> dict[str, Any]:
        """JSON form (the spec file)."""
        data = asdict(self)
        data["budget"] = {"kind": str(self.budget.kind), "amount": self.budget.amount}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExperimentSpec:
        """Inverse of `to_json` (keys that are not fields, e.g. the command, are skipped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values.update(
            arms=tuple(Arm(**a) for a in data["arms"]),
            seeds=tuple(data["seeds"]),
            budget=(data["budget"]["kind"], data["budget"]["amount"]),
        )
        return cls(**cls._nested_from_json(values))

    @classmethod
    def _nested_from_json(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Subclasses turn their nested JSON fields back into objects here."""
        return values

    def seeds_added_to(self, saved: dict[str, Any]) -> tuple[int, ...]:
        """The seeds this spec adds to the saved one (its spec file's contents) where it is the
        same experiment with more seeds (every saved seed kept), else (): a comparison grows by
        seeds, as power planning asks, without touching the runs it has."""
        if not self.SEEDS_EXTEND:
            return ()
        try:
            old = type(self).from_json(saved)
        except (KeyError, TypeError, ValueError):
            return ()
        if dataclasses.replace(old, seeds=self.seeds) != self or not set(old.seeds) < set(self.seeds):
            return ()
        return tuple(s for s in self.seeds if s not in old.seeds)

    def fingerprint(self) -> str:
        """A hash of everything that defines the experiment (two commands that would run
        different experiments never share one; the same as before this base class existed)."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[: self.FINGERPRINT_CHARS]


def save_spec(out: Path, spec: ExperimentSpec, extra: dict[str, Any]) -> dict[str, Any]:
    """Write the spec file (`extra`: storage, study, command, created, ...), or check that the
    one already there describes the same experiment; the whole file."""
    path = out / spec.SPEC_FILE
    if path.exists():
        saved = read_json(path)
        if saved.get("fingerprint") == spec.fingerprint():
            return saved
        added = spec.seeds_added_to(saved)
        if added:  # the same experiment with more seeds: its study and runs stay, the new ones join
            grown = [*saved.get("extended", []), {"seeds": list(added), **_said(extra)}]
            data = {**saved, **spec.to_json(), "fingerprint": spec.fingerprint(), "extended": grown}
            write_spec_file(out, spec.SPEC_FILE, data)
            return read_json(path)
        more = " (more seeds: give all of them, the saved ones too)" if spec.SEEDS_EXTEND else ""
        raise ExperimentError(
            f"--out {out} holds a different {spec.NOUN} ({saved.get('command', f'see {spec.SPEC_FILE}')}); "
            f"use another --out, or the same arguments to resume it{more}"
        )
    out.mkdir(parents=True, exist_ok=True)
    data = {"fingerprint": spec.fingerprint(), **spec.to_json(), **extra}
    write_spec_file(out, spec.SPEC_FILE, data)
    return read_json(path)  # as a later command reads it (lists, not tuples)


def _said(extra: dict[str, Any]) -> dict[str, Any]:
    """The command and time of an extension, from a command's spec extras."""
    return {k: extra[k] for k in ("command", "created") if k in extra}


def write_spec_file(out: Path, name: str, data: dict[str, Any]) -> None:
    """Write a spec file through a temporary file and a rename."""
    write_json_atomic(out / name, data)


def load_spec(out: Path, cls: type[ExperimentSpec]) -> tuple[Any, dict[str, Any]]:
    """(spec, the whole spec file) of an experiment directory of kind `cls`."""
    path = Path(out) / cls.SPEC_FILE
    if not path.exists():
        raise ExperimentError(f"{out} is not a {cls.NOUN} directory (no {cls.SPEC_FILE})")
    data = read_json(path)
    return cls.from_json(data), data
