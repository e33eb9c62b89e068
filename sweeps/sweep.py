"""What a sweep is: for each algorithm (arm), one Optuna study of N trials at one budget, each
trial an ordinary run per seed, its value the objective averaged over the seeds.

A sweep directory holds `sweep.json` (this spec; the shared parts, arms and budgets, are
`sweeps.spec`'s), the storage (`study.journal` by default), `<arm>/<trial slot>-s<seed>/` run
directories, `status/` and `logs/`. Every study is filled with exactly N trials when it is
created: the first with the paper's defaults, the others empty (the sampler chooses their
parameters when a worker claims them), so any number of workers on any number of machines run
N trials, no more; a trial whose worker died is enqueued again with the same parameters and
resumes its runs (`sweeps.queue`).

`sweep.json` also holds what `bench sweep` resolved through the runtime before anything ran:
the run's default learning rates (`run_defaults`) and each arm's search space
(`arm_spaces`: the searched parameters, the fixed values, trajectories per step), which the
workers read as they are.

Objectives: `eval/<bench>/avg_at_k` (the selected checkpoint's evaluation on BENCH, through
`bench eval`; BENCH should be a validation split such as `arith-val`, which no report presents
as a result) or `reward/final` (the mean training reward over the last tenth of the steps).
"""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from algorithms.fields import doc
from sweeps.errors import ExperimentError
from sweeps.spaces import Param
from sweeps.spec import Arm, ExperimentSpec

SPEC_FILE = "sweep.json"
PRUNERS = ("wilcoxon", "hyperband", "none")
SAMPLERS = ("tpe", "random", "grid")
FINAL_REWARD = "reward/final"


@dataclass(frozen=True, kw_only=True)
class SweepSpec(ExperimentSpec):
    """A whole sweep (`sweep.json`)."""

    SPEC_FILE: ClassVar[str] = SPEC_FILE
    FINGERPRINT_CHARS: ClassVar[int] = 12
    NOUN: ClassVar[str] = "sweep"

    trials: int = doc("trials per arm", flag="--trials", metavar="N", default=20)
    objective: str = doc(
        f"eval/<bench>/avg_at_k or {FINAL_REWARD} (default: eval/<task>-val/avg_at_k where the task has a "
        f"validation split, else {FINAL_REWARD})",
        flag="--objective",
        metavar="KEY",
    )
    direction: str = doc(
        "whether a higher or a lower objective is better",
        flag="--direction",
        choices=("maximize", "minimize"),
        default="maximize",
    )
    eval_k: int = doc(
        "samples per problem of the objective's evaluation", flag="--eval-k", metavar="K", default=2
    )
    eval_limit: int | None = doc(
        "first N problems of the objective's benchmark", flag="--eval-limit", metavar="N", default=None
    )
    eval_every: int = doc(
        "in-training evaluation every N steps (the curve the hyperband pruner sees; 0: none)",
        flag="--eval-every",
        metavar="N",
        default=0,
    )
    eval_seed: int = 0
    pruner: str = doc(
        "wilcoxon: after each seed's evaluation, per problem, against the best trial; hyperband: on the "
        "in-training curve; none",
        flag="--pruner",
        choices=PRUNERS,
        default="wilcoxon",
    )
    sampler: str = doc(
        "Optuna's sampler of the trials' parameters (grid: low, middle and high of every parameter)",
        flag="--sampler",
        choices=SAMPLERS,
        default="tpe",
    )
    space: dict[str, Any] = doc(
        "search-space overrides ([params.NAME] tables); the spec keeps the file's tables, as given",
        flag="--space",
        metavar="FILE.toml",
        default_factory=dict,
    )

    @property
    def objective_bench(self) -> str | None:
        """The benchmark of an `eval/<bench>/avg_at_k` objective (None for `reward/final`)."""
        return None if self.objective == FINAL_REWARD else self.objective.split("/")[1]

    def config_layers(self, arm: Arm, seed: int, values_layer: dict[str, Any]) -> list[dict[str, Any]]:
        """The config layers of one run of a trial, lowest first: task and seed, the shared
        settings, the budget, in-training evaluation on the objective's benchmark (for pruning),
        the arm, then the trial's parameters."""
        evals = {
            "eval_every": self.eval_every,
            "eval_bench": (self.objective_bench or "") if self.eval_every else "",
            "eval_k": self.eval_k,
            "eval_limit": self.eval_limit,
            "eval_seed": self.eval_seed,
        }
        return self.run_layers(arm, seed, evals, values_layer)

    def study_name(self, arm: Arm) -> str:
        """The arm's study in the storage."""
        return f"sweep-{arm.slug}-{self.fingerprint()}"


@dataclass(frozen=True)
class ArmSpace:
    """What a sweep searches for one arm, and the arm's settings it depends on (resolved by
    `bench sweep` through the runtime, kept in sweep.json `arm_spaces`)."""

    params: list[Param]
    fixed: dict[str, Any]
    trajectories_per_step: int

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "params": [asdict(p) for p in self.params],
            "fixed": dict(self.fixed),
            "trajectories_per_step": self.trajectories_per_step,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArmSpace:
        """Inverse of `to_json`."""
        params = [Param(**{**p, "choices": tuple(p.get("choices", ()))}) for p in data["params"]]
        return cls(params, dict(data["fixed"]), int(data["trajectories_per_step"]))


def arm_spaces(data: dict[str, Any], spec: SweepSpec) -> dict[str, ArmSpace]:
    """Every arm's space from a sweep.json; a one-line error for a sweep.json that has none (one
    written by an older version: `bench sweep` with the same arguments adds them)."""
    saved = data.get("arm_spaces") or {}
    missing = [arm.name for arm in spec.arms if arm.name not in saved]
    if missing:
        raise ExperimentError(
            f"{SPEC_FILE} has no search space for {', '.join(missing)}; run the same bench sweep command "
            "to resume this sweep (it records them)"
        )
    return {name: ArmSpace.from_json(saved[name]) for name in saved}


def check_objective(objective: str, benchmarks: list[str]) -> None:
    """`reward/final` or `eval/<bench>/avg_at_k` with a registered bench; one line otherwise."""
    if objective == FINAL_REWARD:
        return
    parts = objective.split("/")
    if len(parts) != 3 or parts[0] != "eval" or parts[2] != "avg_at_k":
        raise ExperimentError(f"--objective {objective!r}: expected eval/<bench>/avg_at_k or {FINAL_REWARD}")
    if parts[1] not in benchmarks:
        close = difflib.get_close_matches(parts[1], benchmarks, n=1)
        hint = f" (did you mean eval/{close[0]}/avg_at_k?)" if close else ""
        raise ExperimentError(f"--objective {objective}: unknown benchmark {parts[1]!r}{hint}")
