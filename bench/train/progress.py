"""`bench run`'s progress bar: it counts the budget that will stop the run, in that budget's unit.

A run stops at the first kind of the budget table (`results.budgets.BUDGETS`) whose limit its
consumption reaches: steps, trajectories, tokens, FLOPs or minutes. The bar follows the kind
that is furthest along (the one that will stop the run if the rates hold), so "trajectories
12,288/32,000" rather than "step 2/60" under a trajectory budget; its ETA is tqdm's, from the
average rate of that count since the bar started (no smoothing: a step's count jumps by a
batch), so it follows the budget that stops the run. When another kind overtakes, the bar
starts again on it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from results.budgets import BUDGETS, BudgetRow

UNITS = {"steps": "step", "trajectories": "traj", "tokens": "tok", "flops": "FLOP", "minutes": "min"}
"""the bar's unit of each budget kind (a kind not named here: its own name)"""


def _limits(config: Any) -> list[tuple[BudgetRow, float]]:
    """(row, limit in the count's unit) of every kind the config limits."""
    out = []
    for row in BUDGETS:
        limit = getattr(config, row.field, None)
        if limit is not None:
            out.append((row, float(limit) * row.scale))
    return out


def counts_of(step: int, consumed: Any) -> dict[str, float]:
    """The counts the budget table compares with its limits: `step` and the consumption's."""
    return {"step": float(step), **{k: float(v) for k, v in asdict(consumed).items()}}


def leading(
    limits: list[tuple[BudgetRow, float]], counts: dict[str, float]
) -> tuple[BudgetRow, float] | None:
    """The limited kind furthest along (the largest share of its limit spent; the budget table's
    order on ties), or None without a limit."""
    best, share = None, -1.0
    for row, limit in limits:
        done = counts.get(row.counts, 0.0) / limit if limit > 0 else 1.0
        if done > share:
            best, share = (row, limit), done
    return best


class BudgetBar:
    """A tqdm bar over the leading budget (module docstring); `update` after every step."""

    def __init__(self, config: Any, counts: dict[str, float], enabled: bool = True) -> None:
        self.limits = _limits(config) if enabled else []
        self.bar, self.kind = None, None
        self.update(counts)

    def _start(self, row: BudgetRow, limit: float, counts: dict[str, float]) -> None:
        from tqdm.auto import tqdm

        if self.bar is not None:
            self.bar.close()
        whole = row.whole and row.scale == 1
        self.bar = tqdm(
            total=int(limit) if whole else limit / row.scale,
            initial=self._value(row, counts),
            desc="train",
            unit=UNITS.get(str(row.kind), str(row.kind)),
            unit_scale=row.kind in ("tokens", "flops"),
            smoothing=0,
            dynamic_ncols=True,
            bar_format=None
            if whole
            else "{l_bar}{bar}| {n:.1f}/{total:.1f} {unit} [{elapsed}<{remaining}{postfix}]",
        )
        self.kind = row.kind

    @staticmethod
    def _value(row: BudgetRow, counts: dict[str, float]) -> float:
        """The count of `row` in the bar's unit (minutes for a minute budget)."""
        value = counts.get(row.counts, 0.0) / row.scale
        return int(value) if row.whole and row.scale == 1 else value

    def update(self, counts: dict[str, float], postfix: dict[str, str] | None = None) -> None:
        """Move the bar to `counts` (`counts_of`), switching to another kind if it leads now."""
        lead = leading(self.limits, counts)
        if lead is None:
            return
        row, limit = lead
        if row.kind != self.kind:
            self._start(row, limit, counts)
            return
        value = min(self._value(row, counts), self.bar.total)
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(value - self.bar.n)

    def close(self) -> None:
        """Close the bar (it stays on screen)."""
        if self.bar is not None:
            self.bar.close()


def step_postfix(record: dict[str, float]) -> dict[str, str]:
    """What the bar shows beside the count: the step, its mean reward and staleness."""
    out = {"step": str(int(record.get("step", 0)))}
    if record.get("reward/mean") is not None:
        out["reward"] = f"{record['reward/mean']:.3f}"
    if record.get("staleness/mean") is not None:
        out["stale"] = f"{record['staleness/mean']:.2f}"
    return out
