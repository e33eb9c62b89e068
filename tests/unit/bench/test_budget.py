"""Run budgets: which one stops a run, and consumption counts that survive a checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

from bench.train.budget import Consumption, stop_reason


def _config(**budgets):
    base = {
        "steps": 100,
        "max_trajectories": None,
        "max_tokens": None,
        "max_flops": None,
        "max_minutes": None,
    }
    return SimpleNamespace(**{**base, **budgets})


def _consumed(trajectories=0, tokens=0, seconds=0.0, flops=0) -> Consumption:
    return Consumption(trajectories=trajectories, generated_tokens=tokens, elapsed_s=seconds, flops=flops)


def test_each_budget_stops_at_its_own_count():
    assert stop_reason(_config(), 99, _consumed()) is None
    assert stop_reason(_config(), 100, _consumed()) == "steps"
    assert stop_reason(_config(max_trajectories=128), 1, _consumed(trajectories=127)) is None
    assert stop_reason(_config(max_trajectories=128), 2, _consumed(trajectories=128)) == "trajectories"
    assert stop_reason(_config(max_tokens=1000), 5, _consumed(tokens=999)) is None
    assert stop_reason(_config(max_tokens=1000), 5, _consumed(tokens=1001)) == "tokens"
    assert stop_reason(_config(max_flops=10**15), 5, _consumed(flops=10**15 - 1)) is None
    assert stop_reason(_config(max_flops=10**15), 5, _consumed(flops=10**15)) == "flops"
    assert stop_reason(_config(max_minutes=0.5), 5, _consumed(seconds=29.9)) is None
    assert stop_reason(_config(max_minutes=0.5), 5, _consumed(seconds=30.0)) == "minutes"
    # several spent at once: the first of STOP_REASONS
    assert stop_reason(_config(steps=3, max_tokens=1), 3, _consumed(tokens=5)) == "steps"


def test_steps_add_up_and_the_critic_share_is_of_learner_time():
    c = Consumption()
    step = {
        "budget/step_trajectories": 64.0,
        "budget/step_generated_trajectories": 72.0,
        "budget/step_generated_tokens": 2000.0,
        "budget/step_flops": 3e12,
        "budget/step_generation_flops": 1e12,
        "budget/step_critic_flops": 1.5e12,
        "time/learner_s": 0.4,
        "time/critic_s": 0.1,
    }
    c.add(step, 1.5)
    c.add(step, 0.5)
    assert (c.trajectories, c.generated_trajectories, c.generated_tokens) == (128, 144, 4000)
    assert c.elapsed_s == 2.0 and abs(c.as_dict()["critic_share_of_learner_time"] - 0.25) < 1e-12
    assert c.as_metrics()["budget/generated_tokens"] == 4000.0
    assert (c.flops, c.generation_flops, c.critic_flops) == (6 * 10**12, 2 * 10**12, 3 * 10**12)


def test_consumption_round_trips_through_a_checkpoint(tmp_path):
    c = Consumption(
        trajectories=64,
        generated_trajectories=70,
        generated_tokens=999,
        flops=12345678901234567,
        generation_flops=1000,
        critic_flops=2000,
        elapsed_s=12.5,
        learner_s=3.0,
        critic_s=1.0,
    )
    c.save(tmp_path)
    assert Consumption.load(tmp_path) == c
    assert Consumption.load(None) == Consumption()
    assert Consumption.load(tmp_path / "older-checkpoint") == Consumption()


def test_the_budget_table_matches_the_run_config_fields():
    """One row per kind: its field is an optional run config field of the row's number type,
    and a resume may extend it."""
    import dataclasses
    import typing

    from bench.config import RunConfig
    from bench.train.start import EXTENDING_FIELDS
    from results.budgets import BUDGETS, BudgetKind

    hints = typing.get_type_hints(RunConfig)
    assert [row.kind for row in BUDGETS] == list(BudgetKind)
    for row in BUDGETS:
        assert hints[row.field] == ((int if row.whole else float) | None), row
        assert row.field in EXTENDING_FIELDS
        assert row.counts == "step" or row.counts in {f.name for f in dataclasses.fields(Consumption)}
    assert RunConfig().steps == 60  # `bench run`'s default; None: no step limit


def test_no_step_limit_leaves_the_other_budgets_to_stop_the_run():
    from results.budgets import BudgetKind

    assert stop_reason(_config(steps=None), 10**9, _consumed()) is None
    assert (
        stop_reason(_config(steps=None, max_tokens=1000), 10**9, _consumed(tokens=1000)) is BudgetKind.TOKENS
    )


def test_the_stop_reason_is_a_budget_kind_that_summary_json_round_trips(tmp_path):
    import json

    from results.budgets import BudgetKind
    from results.rundir import RunDir, RunOutcome

    reason = stop_reason(_config(max_trajectories=128), 2, _consumed(trajectories=128))
    assert reason is BudgetKind.TRAJECTORIES
    run = RunDir(tmp_path)
    run.write_summary({"outcome": RunOutcome.FINISHED, "stopped_by": reason, "pid": 7})
    assert json.loads((tmp_path / "summary.json").read_text())["stopped_by"] == "trajectories"
    end = run.read_outcome()
    assert (end.outcome, end.stopped_by, end.pid) == (RunOutcome.FINISHED, BudgetKind.TRAJECTORIES, 7)
