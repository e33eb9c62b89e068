"""What a sweep is: for each algorithm (arm), one Optuna study of N trials at one budget, each
trial an ordinary run per seed, its value the objective averaged over the seeds.

A sweep directory holds `sweep.json` (this spec), the storage (`study.journal` by default),
`<arm>/<trial slot>-s<seed>/` run directories, `status/` and `logs/`. Every study is filled
with exactly N trials when it is created: the first with the paper's defaults, the others
empty (the sampler chooses their parameters when a worker claims them), so any number of
workers on any number of machines run N trials, no more; a trial whose worker died is
enqueued again with the same parameters and resumes its runs (`sweeps.queue`).

Objectives: `eval/<bench>/avg_at_k` (the selected checkpoint's evaluation on BENCH, through
`bench eval`; BENCH should be a validation split such as `arith-val`, which no report presents
as a result) or `reward/final` (the mean training reward over the last tenth of the steps).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from sweeps.grid import BUDGET_KINDS, STEPS_UNDER_A_BUDGET, Arm

SPEC_FILE = "sweep.json"
PRUNERS = ("wilcoxon", "hyperband", "none")
SAMPLERS = ("tpe", "random", "grid")
FINAL_REWARD = "reward/final"


class SweepError(UsageError):
    """A sweep that cannot be set up as asked (one-line message)."""


@dataclass(frozen=True)
class SweepSpec:
    """A whole sweep (`sweep.json`)."""

    task: str
    arms: tuple[Arm, ...]
    trials: int
    objective: str
    direction: str
    budget: tuple[str, float]
    seeds: tuple[int, ...]
    eval_k: int = 2
    eval_limit: int | None = None
    eval_every: int = 0
    eval_seed: int = 0
    pruner: str = "wilcoxon"
    sampler: str = "tpe"
    shared: dict[str, Any] = field(default_factory=dict)
    space: dict[str, Any] = field(default_factory=dict)  # the --space file's tables, as given

    @property
    def objective_bench(self) -> str | None:
        """The benchmark of an `eval/<bench>/avg_at_k` objective (None for `reward/final`)."""
        return None if self.objective == FINAL_REWARD else self.objective.split("/")[1]

    def config_layers(self, arm: Arm, seed: int, values_layer: dict[str, Any]) -> list[dict[str, Any]]:
        """The config layers of one run of a trial, lowest first: task and seed, the shared
        settings, the budget, in-training evaluation on the objective's benchmark (for pruning),
        the arm, then the trial's parameters."""
        kind, amount = self.budget
        evals = {
            "eval_every": self.eval_every,
            "eval_bench": self.objective_bench or "" if self.eval_every else "",
            "eval_k": self.eval_k,
            "eval_limit": self.eval_limit,
            "eval_seed": self.eval_seed,
        }
        budget = {BUDGET_KINDS[kind]: amount, "steps": STEPS_UNDER_A_BUDGET}
        return [
            {"task": self.task, "seed": seed},
            dict(self.shared),
            budget,
            evals,
            arm.config_layer(),
            values_layer,
        ]

    def study_name(self, arm: Arm) -> str:
        """The arm's study in the storage."""
        return f"sweep-{arm.slug}-{self.fingerprint()}"

    def to_json(self) -> dict[str, Any]:
        """JSON form."""
        data = asdict(self)
        data["budget"] = {"kind": self.budget[0], "amount": self.budget[1]}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SweepSpec:
        """Inverse of `to_json`."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields.update(
            arms=tuple(Arm(**a) for a in data["arms"]),
            seeds=tuple(data["seeds"]),
            budget=(data["budget"]["kind"], data["budget"]["amount"]),
        )
        return cls(**fields)

    def fingerprint(self) -> str:
        """A hash of what defines the sweep."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True, default=str).encode()).hexdigest()[
            :12
        ]


def check_objective(objective: str, benchmarks: list[str]) -> None:
    """`reward/final` or `eval/<bench>/avg_at_k` with a registered bench; one line otherwise."""
    if objective == FINAL_REWARD:
        return
    parts = objective.split("/")
    if len(parts) != 3 or parts[0] != "eval" or parts[2] != "avg_at_k":
        raise SweepError(f"--objective {objective!r}: expected eval/<bench>/avg_at_k or {FINAL_REWARD}")
    if parts[1] not in benchmarks:
        import difflib

        close = difflib.get_close_matches(parts[1], benchmarks, n=1)
        hint = f" (did you mean eval/{close[0]}/avg_at_k?)" if close else ""
        raise SweepError(f"--objective {objective}: unknown benchmark {parts[1]!r}{hint}")


def make_sampler(name: str, params: list, seed: int | None = None) -> Any:
    """The Optuna sampler (grid: every param's `grid()` values). Unseeded by default: with one
    seed every worker process (and every restart) would draw the same parameters."""
    import optuna

    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        return optuna.samplers.GridSampler({p.name: p.grid() for p in params}, seed=seed)
    return optuna.samplers.TPESampler(seed=seed)


def make_pruner(name: str, n_reports: int | None) -> Any:
    """wilcoxon: Optuna's WilcoxonPruner on per-(seed, problem) scores of the final evaluation;
    hyperband: a patient Hyperband on the in-training curve, a full trial making `n_reports`
    reports (its max resource; None: Optuna's "auto", the first finished trial's count);
    none: never prunes."""
    import optuna

    if name == "wilcoxon":
        return optuna.pruners.WilcoxonPruner(p_threshold=0.1)
    if name == "hyperband":
        return patient_hyperband(max(2, n_reports) if n_reports else "auto")
    return optuna.pruners.NopPruner()


def patient_hyperband(max_resource: int | str) -> Any:
    """Hyperband (reduction factor 3, rungs from the first report) whose verdict counts only
    when the curve did not improve at its latest report: a noisy RL curve that is still
    rising is never cut, a flat or falling one is cut at its first rung after the first
    report. Hyperband sees every report, so it records the rung values of every trial, good
    ones included. (`PatientPruner(HyperbandPruner())` does not: PatientPruner consults its
    wrapped pruner only on a stalled curve, so Hyperband never records the rungs of improving
    trials, finds no competitors and never prunes; checked with Optuna 5.1.) Hyperband
    promotes the first trials of each bracket (nothing to compare them with), so with a few
    dozen trials some poor ones still run to the end: in a 20-trial SAO sweep on arith 5 were
    cut at their third report and one collapsed trial, first in its bracket, was not."""
    import optuna

    class PatientHyperband(optuna.pruners.BasePruner):
        def __init__(self) -> None:
            self.hyperband = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=max_resource)

        def prune(self, study: Any, trial: Any) -> bool:
            verdict = self.hyperband.prune(study, trial)  # always: records the trial's rung values
            return verdict and _stalled(trial.intermediate_values, study.direction.name == "MAXIMIZE")

    return PatientHyperband()


def _stalled(values: dict[int, float], maximize: bool) -> bool:
    """The curve's latest report is no better than its best earlier one (False before 2)."""
    steps = sorted(values)
    if len(steps) < 2:
        return False
    latest, earlier = values[steps[-1]], [values[s] for s in steps[:-1]]
    return latest <= max(earlier) if maximize else latest >= min(earlier)


def save_spec(out: Path, spec: SweepSpec, extra: dict[str, Any]) -> dict[str, Any]:
    """Write sweep.json, or check that the one there is the same sweep; the whole file."""
    path = out / SPEC_FILE
    if path.exists():
        saved = json.loads(path.read_text())
        if saved.get("fingerprint") != spec.fingerprint():
            raise SweepError(
                f"--out {out} holds a different sweep ({saved.get('command', SPEC_FILE)}); use another "
                "--out, or the same arguments to resume it"
            )
        return saved
    out.mkdir(parents=True, exist_ok=True)
    data = {"fingerprint": spec.fingerprint(), **spec.to_json(), **extra}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    tmp.replace(path)
    return data


def load_spec(out: Path) -> tuple[SweepSpec, dict[str, Any]]:
    """(spec, the whole sweep.json) of a sweep directory."""
    path = Path(out) / SPEC_FILE
    if not path.exists():
        raise SweepError(f"{out} is not a sweep directory (no {SPEC_FILE})")
    data = json.loads(path.read_text())
    return SweepSpec.from_json(data), data


def fill_study(study: Any, trials: int, first: dict[str, Any]) -> None:
    """Enqueue the study's N trial slots once: `first` (the paper's defaults) as fixed
    parameters, the rest empty; a study that has trials is left as it is."""
    if study.get_trials(deepcopy=False):
        return
    for slot in range(trials):
        params = first if slot == 0 else {}
        study.enqueue_trial(params, user_attrs={"run": f"trial-{slot:03d}"}, skip_if_exists=False)
