"""`bench run`'s bar counts the budget that stops the run, in its unit, and its ETA follows that
count (`bench.train.progress`)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.train.progress import BudgetBar, leading
from results.budgets import BUDGETS


def _config(**limits):
    fields = {row.field: None for row in BUDGETS}
    return SimpleNamespace(**{**fields, **limits})


def _counts(step=0, trajectories=0, tokens=0, elapsed_s=0.0, flops=0):
    return {
        "step": step,
        "trajectories": trajectories,
        "generated_tokens": tokens,
        "elapsed_s": elapsed_s,
        "flops": flops,
    }


def test_the_bar_follows_the_budget_furthest_along():
    config = _config(steps=60, max_trajectories=320)
    row, limit = leading(
        [(r, getattr(config, r.field) * r.scale) for r in BUDGETS if getattr(config, r.field)], _counts(2, 64)
    )
    assert (row.kind, limit) == ("trajectories", 320)  # 20% of the trajectories, 3% of the steps
    bar = BudgetBar(config, _counts(2, 64))
    assert (bar.kind, bar.bar.total, bar.bar.n, bar.bar.unit) == ("trajectories", 320, 64, "traj")
    bar.update(_counts(3, 96), {"reward": "0.500"})
    assert bar.bar.n == 96 and "reward=0.500" in str(bar.bar)
    bar.close()


def test_another_kind_that_overtakes_takes_the_bar():
    bar = BudgetBar(_config(steps=10, max_trajectories=1000), _counts(1, 32))
    assert bar.kind == "steps" and bar.bar.total == 10
    bar.update(_counts(2, 900))
    assert bar.kind == "trajectories" and bar.bar.n == 900
    bar.close()


def test_a_minute_budget_counts_minutes_and_the_eta_follows_the_rate():
    bar = BudgetBar(_config(max_minutes=4.0), _counts(elapsed_s=0.0))
    assert bar.kind == "minutes" and bar.bar.total == 4.0 and bar.bar.unit == "min"
    bar.bar.start_t -= 60  # one minute of wall time has passed ...
    bar.update(_counts(3, elapsed_s=60.0))  # ... and one of the four budgeted minutes is spent
    assert bar.bar.n == pytest.approx(1.0) and "1.0/4.0 min" in str(bar.bar)
    assert "<03:00" in str(bar.bar)  # three minutes left at this rate
    bar.close()


def test_a_trajectory_budget_eta_is_the_remaining_count_over_its_rate():
    bar = BudgetBar(_config(max_trajectories=400), _counts())
    bar.bar.start_t -= 10
    bar.update(_counts(5, 100))  # 10 trajectories a second
    assert "<00:30" in str(bar.bar)  # 300 left
    bar.close()


def test_no_bar_without_progress_or_without_a_limit():
    assert BudgetBar(_config(max_trajectories=10), _counts(), enabled=False).bar is None
    assert BudgetBar(_config(), _counts()).bar is None
