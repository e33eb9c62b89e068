"""The Optuna side of a sweep: the sampler, the pruners, a study filled with its N trial
slots, and the parameters of a claimed trial (as `study.ask` would make them)."""

from __future__ import annotations

import math
from typing import Any

from results.budgets import BudgetKind
from results.experiments import trial_slot
from sweeps.queue import Claim, RunQueue
from sweeps.spaces import Param
from sweeps.sweep import FINAL_REWARD, SweepSpec

REWARD_WINDOW = 10
"""Steps averaged into one in-training reward report, and into the final reward."""


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


def fill_study(study: Any, trials: int, first: dict[str, Any]) -> None:
    """Enqueue the study's N trial slots once: `first` (the paper's defaults) as fixed
    parameters, the rest empty. A slot that has a trial is left as it is, so a fill cut short
    (a kill, or a journal whose last records were lost) is completed by the next start."""
    filled = {t.user_attrs.get("run") for t in study.get_trials(deepcopy=False)}
    for slot in range(trials):
        run = trial_slot(slot)
        if run not in filled:
            params = first if slot == 0 else {}
            study.enqueue_trial(params, user_attrs={"run": run}, skip_if_exists=False)


def suggest(trial: Any, p: Param) -> Any:
    """The trial's value of `p` (the sampler's choice, or the enqueued fixed value)."""
    if p.kind == "float":
        return trial.suggest_float(p.name, p.low, p.high, log=p.log)
    if p.kind == "int":
        return trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
    return trial.suggest_categorical(p.name, list(p.choices))


def trial_values(
    queue: RunQueue, claim: Claim, params: list[Param], fixed: dict[str, Any]
) -> tuple[Any, dict]:
    """(the Optuna Trial of a claimed trial, its parameter values), as `study.ask` would make them."""
    import optuna

    study = queue.study
    study.sampler.before_trial(study, queue.storage.get_trial(claim.trial_id))
    trial = optuna.trial.Trial(study, claim.trial_id)
    return trial, {**fixed, **{p.name: suggest(trial, p) for p in params}}


def expected_reports(spec: SweepSpec, trajectories_per_step: int) -> int | None:
    """In-training reports of a full trial (Hyperband's max resource): per seed, one per
    in-training evaluation (an eval objective) or per REWARD_WINDOW steps (reward/final), when
    a trajectory budget fixes the steps; None (unknown until a trial finishes) otherwise."""
    kind, amount = spec.budget
    every = REWARD_WINDOW if spec.objective == FINAL_REWARD else spec.eval_every
    if kind is not BudgetKind.TRAJECTORIES or not every:
        return None
    steps = math.ceil(amount / trajectories_per_step)
    return max(1, steps // every) * len(spec.seeds)
