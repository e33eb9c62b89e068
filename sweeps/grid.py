"""What a comparison is: arms x seeds at one matched budget, evaluated the same way.

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
comparison's shared settings (`--set`, `--mode`, ...) and the arm cannot change them unless
its TOML `set` says so, which the report lists. Standard library only; the run configs are
validated by `bench.config.build_config` in the command, before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from results.comparison import SPEC_FILE, arm_slug

BUDGET_KINDS = {"trajectories": "max_trajectories", "tokens": "max_tokens", "minutes": "max_minutes"}
"""`--budget KIND=N` -> the run config field that enforces it."""

STEPS_UNDER_A_BUDGET = 1_000_000
"""`steps` of a run whose budget is trajectories, tokens or minutes: the budget stops it."""

ALIASES = {"grpo+dis": ("grpo", "dis")}
"""Paper names of arms that are an algorithm with a preset."""


class GridError(UsageError):
    """A comparison that cannot be set up as asked (one-line message)."""


@dataclass(frozen=True)
class Arm:
    """One algorithm setting of a comparison."""

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
        """The arm's part of a run config (build_config layer)."""
        layer: dict[str, Any] = {"algo": self.algo, **self.run_args}
        if self.preset is not None:
            layer["algo_preset"] = self.preset
        if self.algo_args:
            layer["algo_args"] = dict(self.algo_args)
        return layer


def parse_arms(text: str) -> list[Arm]:
    """Arms from `--algos`: a comma list (module docstring) or the path of a TOML file of arms."""
    if text.endswith(".toml"):
        return _arms_from_toml(Path(text))
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise GridError("--algos needs at least one algorithm, e.g. --algos sao,grpo")
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
        raise GridError(f"--algos {path}: file not found")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"--algos {path}: invalid TOML: {exc}") from None
    tables = data.get("arms")
    if not isinstance(tables, dict) or not tables:
        raise GridError(f"--algos {path}: no [arms.NAME] tables")
    arms = []
    for name, table in tables.items():
        unknown = sorted(set(table) - {"algo", "preset", "algo_args", "set"})
        if unknown or "algo" not in table:
            raise GridError(
                f"--algos {path}: arm {name!r} needs 'algo' and may have 'preset', 'algo_args', 'set'"
                + (f" (unknown: {', '.join(unknown)})" if unknown else "")
            )
        run_args = dict(table.get("set", {}))
        if "algo" in run_args or "algo_preset" in run_args:
            raise GridError(f"--algos {path}: arm {name!r}: give 'algo' and 'preset' as keys, not in 'set'")
        arms.append(Arm(name, table["algo"], table.get("preset"), dict(table.get("algo_args", {})), run_args))
    _check_unique(arms)
    return arms


def _check_unique(arms: list[Arm]) -> None:
    slugs = [a.slug for a in arms]
    duplicated = sorted({s for s in slugs if slugs.count(s) > 1})
    if duplicated:
        raise GridError(f"--algos names the arm {duplicated[0]!r} twice")


def parse_budget(text: str) -> tuple[str, float]:
    """`trajectories=1280` -> ("trajectories", 1280); one line naming the valid kinds otherwise."""
    kind, sep, value = text.partition("=")
    kinds = ", ".join(f"{k}=N" for k in BUDGET_KINDS)
    if not sep or kind not in BUDGET_KINDS:
        raise GridError(f"--budget {text!r}: expected one of {kinds}")
    try:
        amount = float(value)
    except ValueError:
        raise GridError(f"--budget {text!r}: {value!r} is not a number") from None
    if not amount > 0 or amount != amount or amount == float("inf"):
        raise GridError(f"--budget {text!r}: must be a positive number")
    if kind != "minutes" and amount != int(amount):
        raise GridError(f"--budget {text!r}: {kind} must be a whole number")
    return kind, (amount if kind == "minutes" else int(amount))


@dataclass(frozen=True)
class EvalPlan:
    """How every run's checkpoints are evaluated (the same for every arm and seed)."""

    benchmarks: tuple[str, ...] = ()
    every: int = 0  # in-training evaluation every N steps (0: none)
    k: int = 4
    limit: int | None = None
    seed: int = 0  # one evaluation seed for every run: samples pair across arms
    select: str | None = None  # None: the final checkpoint; "best-on=BENCH": the best by BENCH


@dataclass(frozen=True)
class ComparisonSpec:
    """A whole comparison; `comparison.json` in its output directory."""

    task: str
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...]
    budget: tuple[str, float]
    eval: EvalPlan
    shared: dict[str, Any] = field(default_factory=dict)  # run fields for every run (--mode, --set)
    tuning: dict[str, Any] | None = None  # with --params-from-sweep: the sweep and its budget per arm

    def run_names(self) -> list[str]:
        """`<arm>-s<seed>` of every run, arm-major (the order workers take them in)."""
        return [self.run_name(arm, seed) for arm in self.arms for seed in self.seeds]

    @staticmethod
    def run_name(arm: Arm, seed: int) -> str:
        """The run's name: its key in the study and its directory under `runs/`."""
        return f"{arm.slug}-s{seed}"

    def arm_and_seed(self, run_name: str) -> tuple[Arm, int]:
        """Inverse of `run_name`."""
        for arm in self.arms:
            for seed in self.seeds:
                if self.run_name(arm, seed) == run_name:
                    return arm, seed
        raise GridError(f"run {run_name!r} is not part of this comparison")

    def config_layers(self, arm: Arm, seed: int) -> list[dict[str, Any]]:
        """The config layers of one run, lowest first (for `bench.config.build_config`)."""
        kind, amount = self.budget
        budget = {BUDGET_KINDS[kind]: amount, "steps": STEPS_UNDER_A_BUDGET}
        plan = self.eval
        in_training = [b for b in plan.benchmarks if plan.every] + (
            [_select_bench(plan.select)] if plan.select else []
        )
        evals = {
            "eval_every": plan.every,
            "eval_bench": ",".join(dict.fromkeys(in_training)),
            "eval_k": plan.k,
            "eval_limit": plan.limit,
            "eval_seed": plan.seed,
        }
        if plan.select:  # every evaluated checkpoint must be kept to be selectable
            evals.update(checkpoint_every=plan.every, keep_checkpoints=0)
        return [{"task": self.task, "seed": seed}, dict(self.shared), budget, evals, arm.config_layer()]

    def to_json(self) -> dict[str, Any]:
        """JSON form (comparison.json)."""
        data = asdict(self)
        data["budget"] = {"kind": self.budget[0], "amount": self.budget[1]}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ComparisonSpec:
        """Inverse of `to_json`."""
        return cls(
            task=data["task"],
            arms=tuple(Arm(**a) for a in data["arms"]),
            seeds=tuple(data["seeds"]),
            budget=(data["budget"]["kind"], data["budget"]["amount"]),
            eval=EvalPlan(**{**data["eval"], "benchmarks": tuple(data["eval"]["benchmarks"])}),
            shared=dict(data.get("shared", {})),
            tuning=data.get("tuning"),
        )

    def fingerprint(self) -> str:
        """A hash of everything that defines the experiment (two commands that would run
        different comparisons never share one)."""
        text = json.dumps(self.to_json(), sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _select_bench(select: str) -> str:
    """`best-on=BENCH` -> BENCH."""
    return select.partition("=")[2]


def parse_select(text: str | None, reported: tuple[str, ...], every: int) -> str | None:
    """Check `--select`: `final` (None) or `best-on=BENCH` with BENCH not among the reported
    benchmarks (selecting on a test set would bias the comparison) and in-training evaluation on."""
    if text in (None, "final"):
        return None
    kind, sep, bench = text.partition("=")
    if kind != "best-on" or not sep or not bench:
        raise GridError(f"--select {text!r}: expected 'final' or 'best-on=BENCH'")
    if bench in reported:
        raise GridError(
            f"--select {text}: {bench} is also a reported benchmark; select on a benchmark that is not "
            "reported (selecting on the test set biases the comparison)"
        )
    if not every:
        raise GridError(f"--select {text} needs in-training evaluation: give --eval-every N")
    return text


def save_spec(out: Path, spec: ComparisonSpec, extra: dict[str, Any]) -> None:
    """Write comparison.json (`extra`: storage, study, command, created), or check that the one
    already there describes the same comparison."""
    path = out / SPEC_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("fingerprint") != spec.fingerprint():
            raise GridError(
                f"--out {out} holds a different comparison ({saved.get('command', 'see comparison.json')}); "
                "use another --out, or the same arguments to resume it"
            )
        return
    out.mkdir(parents=True, exist_ok=True)
    data = {"fingerprint": spec.fingerprint(), **spec.to_json(), **extra}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)


def load_spec(out: Path) -> tuple[ComparisonSpec, dict[str, Any]]:
    """(spec, the whole comparison.json) of a comparison directory."""
    path = Path(out) / SPEC_FILE
    if not path.exists():
        raise GridError(f"{out} is not a comparison directory (no {SPEC_FILE})")
    data = json.loads(path.read_text())
    return ComparisonSpec.from_json(data), data
