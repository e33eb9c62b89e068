"""The budgets a run can stop at, in one table: what each kind is called (`--budget KIND=N`,
summary.json's `stopped_by`), the run config field that holds its limit, its unit, whether
its amounts are whole numbers, and which consumption count is compared with the limit.

The training loop (`bench.train.budget.stop_reason`), the config checks, comparisons and
sweeps (`--budget`) and the readers of summary.json all go through this table, so adding a
kind is one row here (plus its count in `bench.train.budget.Consumption`). Standard library
only: comparisons, sweeps and reports read it without the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class BudgetKind(StrEnum):
    """What stopped a run that spent its budget (summary.json `stopped_by`)."""

    STEPS = "steps"
    TRAJECTORIES = "trajectories"
    TOKENS = "tokens"
    MINUTES = "minutes"


@dataclass(frozen=True)
class BudgetRow:
    """One row of the budget table: a kind and what it means."""

    kind: BudgetKind
    field: str
    """the run config field that holds the limit (None there: no limit of this kind)"""
    unit: str
    """what an amount counts, for help texts and messages"""
    whole: bool
    """amounts are whole numbers"""
    counts: str
    """what is compared with the limit: `step` (policy steps done) or a `Consumption` count"""
    scale: float = 1.0
    """the limit times this is in the count's unit (minutes are counted in seconds)"""
    matched: bool = True
    """may be a comparison's or sweep's `--budget` (steps are not: see `bench compare`)"""


BUDGETS: tuple[BudgetRow, ...] = (
    BudgetRow(BudgetKind.STEPS, "steps", "policy steps", True, "step", matched=False),
    BudgetRow(BudgetKind.TRAJECTORIES, "max_trajectories", "trajectories trained on", True, "trajectories"),
    BudgetRow(BudgetKind.TOKENS, "max_tokens", "tokens generated", True, "generated_tokens"),
    BudgetRow(BudgetKind.MINUTES, "max_minutes", "minutes of training, wall clock", False, "elapsed_s", 60.0),
)
"""Every budget kind, in the order a run checks them (the first spent one is its stop reason)."""


def budget_of(kind: BudgetKind | str) -> BudgetRow:
    """The table row of `kind` (KeyError for a kind that is not in the table)."""
    for row in BUDGETS:
        if row.kind == kind:
            return row
    raise KeyError(kind)


def matched_budgets() -> tuple[BudgetRow, ...]:
    """The kinds a comparison or sweep may match its runs on (`--budget KIND=N`)."""
    return tuple(row for row in BUDGETS if row.matched)


def budget_help(units: bool = True) -> str:
    """The `--budget` kinds for help texts, `trajectories=N (trajectories trained on), ...`, or
    without their units for one-line errors, `trajectories=N, tokens=N, minutes=N`."""
    return ", ".join(f"{row.kind}=N" + (f" ({row.unit})" if units else "") for row in matched_budgets())


def spent(limits: dict[str, float | None], counts: dict[str, float]) -> BudgetKind | None:
    """The first kind whose limit (`limits`: run config field -> limit) the counts
    (`counts`: `step` and the consumption counts) have reached; None while none has."""
    for row in BUDGETS:
        limit = limits.get(row.field)
        if limit is not None and counts[row.counts] >= limit * row.scale:
            return row.kind
    return None


def limits_text(config: dict) -> str | None:
    """The limits a run config sets, `steps=60, trajectories=2048` (None: none is set)."""
    parts = [f"{row.kind}={config[row.field]:g}" for row in BUDGETS if config.get(row.field) is not None]
    return ", ".join(parts) or None
