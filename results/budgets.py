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
    FLOPS = "flops"
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
    # compute, load-independent unlike minutes: `bench.train.compute` says what is counted
    BudgetRow(BudgetKind.FLOPS, "max_flops", "model FLOPs of generation, learner and critic", True, "flops"),
    BudgetRow(BudgetKind.MINUTES, "max_minutes", "minutes of training, wall clock", False, "elapsed_s", 60.0),
)
"""Every budget kind, in the order a run checks them (the first spent one is its stop reason)."""


MAX_AMOUNT = 2**53
"""The largest budget amount of a kind that counts items or time (about 9.0e15). Amounts travel
as JSON numbers and floats (spec files, config.json, summaries), and above 2**53 not every whole
number is one: a budget there would not be the one asked for, or stop where it says. Every
realistic such budget is far below (1e12 tokens is more than any RL run generates)."""

MAX_FLOPS = 10**30
"""The largest FLOPs budget. FLOPs budgets are naturally above 2**53 (a 0.5B model generating a
million tokens is ~1e15 FLOPs): they are whole numbers read exactly (`--budget flops=3.2e16` is
parsed as a decimal) and kept as Python ints, which JSON writes and reads exactly; the bound only
refuses the absurd (1e30 is about 100,000 times the compute of the largest training runs)."""


def max_amount(kind: BudgetKind | str) -> int:
    """The largest budget amount of `kind` (`MAX_FLOPS` for FLOPs, `MAX_AMOUNT` otherwise)."""
    return MAX_FLOPS if kind == BudgetKind.FLOPS else MAX_AMOUNT


def check_amount(name: str, amount: float, kind: BudgetKind | str) -> str | None:
    """What is wrong with a budget amount of `kind` (not finite, not positive, above
    `max_amount(kind)`), as the end of a one-line error about `name`; None when it is fine."""
    if amount != amount or amount in (float("inf"), float("-inf")):
        return f"{name}: must be a finite number, got {amount}"
    if amount <= 0:
        return f"{name}: must be a positive number, got {amount:g}"
    if kind == BudgetKind.FLOPS and amount > MAX_FLOPS:
        return f"{name}: {amount:g} is above the largest FLOPs budget, 1e30"
    if amount > max_amount(kind):
        return (
            f"{name}: {amount:g} is above the largest budget, 2**53 (~9.0e15), beyond which a "
            "JSON or float number no longer holds every whole number"
        )
    return None


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
    without their units for one-line errors, `trajectories=N, tokens=N, flops=N, minutes=N`."""
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
