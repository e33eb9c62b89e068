"""What a run has consumed, and when its budget is spent.

A comparison is fair only at matched budgets, so a run can stop on any kind of the budget
table (`results.budgets.BUDGETS`): its `steps`, the trajectories the learner trained on
(`max_trajectories`), the tokens generated (`max_tokens`, counting trajectories dropped as
stale or filtered, since generating them cost the same), the model FLOPs of generation, learner
and critic (`max_flops`, counted by `bench.train.compute`) or wall-clock minutes (`max_minutes`).
Every run records what it consumed, whatever stopped it: per step as cumulative `budget/` metrics, at the end in summary.json, and in each
checkpoint (`consumption.json`), so a resumed run continues the counts (minutes included)
instead of starting them afresh.

The critic's share of learner compute is measured as time (`time/critic_s` of the learner:
the value forward passes and the K critic updates) over the learner's total time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from results.budgets import BUDGETS, BudgetKind, spent

CONSUMPTION_FILE = "consumption.json"
"""Written into every checkpoint: the `Consumption` counts at its step."""


@dataclass
class Consumption:
    """Cumulative counts of one run (all ranks together under data parallelism)."""

    trajectories: int = 0
    """trajectories the learner trained on"""
    generated_trajectories: int = 0
    """finished episodes taken from the rollouts: trained on, dropped as stale or filtered"""
    generated_tokens: int = 0
    """model-generated (action) tokens of those episodes"""
    flops: int = 0
    """model FLOPs of every pass the run made: generation, learner and critic (`bench.train.compute`;
    0: not counted, a run from before they were or of a model whose shape is unknown)"""
    generation_flops: int = 0
    """the part of `flops` spent generating rollouts"""
    critic_flops: int = 0
    """the part of `flops` spent on the critic's updates"""
    elapsed_s: float = 0.0
    """training wall time, summed over the run's resumes"""
    learner_s: float = 0.0
    """time in the learner's steps (critic and policy updates)"""
    critic_s: float = 0.0
    """the part of `learner_s` spent on the critic (value passes and updates)"""

    def add(self, step_metrics: dict[str, float], step_s: float) -> None:
        """Count one step from its metrics (`time/critic_s`, `time/learner_s`, `budget/step_*`)."""
        self.trajectories += int(step_metrics.get("budget/step_trajectories", 0))
        self.generated_trajectories += int(step_metrics.get("budget/step_generated_trajectories", 0))
        self.generated_tokens += int(step_metrics.get("budget/step_generated_tokens", 0))
        self.flops += int(step_metrics.get("budget/step_flops", 0))
        self.generation_flops += int(step_metrics.get("budget/step_generation_flops", 0))
        self.critic_flops += int(step_metrics.get("budget/step_critic_flops", 0))
        self.learner_s += float(step_metrics.get("time/learner_s", 0.0))
        self.critic_s += float(step_metrics.get("time/critic_s", 0.0))
        self.elapsed_s += step_s

    def as_metrics(self) -> dict[str, float]:
        """The cumulative counts as `budget/` metrics of a step."""
        return {f"budget/{f.name}": float(getattr(self, f.name)) for f in fields(self)}

    def as_dict(self) -> dict[str, Any]:
        """JSON form (summary.json, checkpoints), with the critic's share of learner time."""
        share = self.critic_s / self.learner_s if self.learner_s > 0 else 0.0
        return {**asdict(self), "critic_share_of_learner_time": share}

    def save(self, directory: Path) -> None:
        """Write `consumption.json` into a checkpoint being written."""
        (directory / CONSUMPTION_FILE).write_text(json.dumps(asdict(self)) + "\n")

    @classmethod
    def load(cls, checkpoint: Path | None) -> Consumption:
        """The counts saved with `checkpoint` (zeros for None or a checkpoint from before they were)."""
        path = None if checkpoint is None else checkpoint / CONSUMPTION_FILE
        if path is None or not path.exists():
            return cls()
        saved = json.loads(path.read_text())
        return cls(**{f.name: saved.get(f.name, f.default) for f in fields(cls)})


def stop_reason(config: Any, step: int, consumed: Consumption) -> BudgetKind | None:
    """Which budget of `config` is spent after `step` steps with `consumed` counted (the first
    kind of the budget table that applies), or None to go on."""
    limits = {row.field: getattr(config, row.field) for row in BUDGETS}
    return spent(limits, {"step": step, **asdict(consumed)})
