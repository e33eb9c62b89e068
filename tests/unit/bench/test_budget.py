"""Run budgets: which one stops a run, and consumption counts that survive a checkpoint."""

from __future__ import annotations

from types import SimpleNamespace

from bench.train.budget import Consumption, stop_reason


def _config(**budgets):
    base = {"steps": 100, "max_trajectories": None, "max_tokens": None, "max_minutes": None}
    return SimpleNamespace(**{**base, **budgets})


def _consumed(trajectories=0, tokens=0, seconds=0.0) -> Consumption:
    return Consumption(trajectories=trajectories, generated_tokens=tokens, elapsed_s=seconds)


def test_each_budget_stops_at_its_own_count():
    assert stop_reason(_config(), 99, _consumed()) is None
    assert stop_reason(_config(), 100, _consumed()) == "steps"
    assert stop_reason(_config(max_trajectories=128), 1, _consumed(trajectories=127)) is None
    assert stop_reason(_config(max_trajectories=128), 2, _consumed(trajectories=128)) == "trajectories"
    assert stop_reason(_config(max_tokens=1000), 5, _consumed(tokens=999)) is None
    assert stop_reason(_config(max_tokens=1000), 5, _consumed(tokens=1001)) == "tokens"
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
        "time/learner_s": 0.4,
        "time/critic_s": 0.1,
    }
    c.add(step, 1.5)
    c.add(step, 0.5)
    assert (c.trajectories, c.generated_trajectories, c.generated_tokens) == (128, 144, 4000)
    assert c.elapsed_s == 2.0 and abs(c.as_dict()["critic_share_of_learner_time"] - 0.25) < 1e-12
    assert c.as_metrics()["budget/generated_tokens"] == 4000.0


def test_consumption_round_trips_through_a_checkpoint(tmp_path):
    c = Consumption(
        trajectories=64,
        generated_trajectories=70,
        generated_tokens=999,
        elapsed_s=12.5,
        learner_s=3.0,
        critic_s=1.0,
    )
    c.save(tmp_path)
    assert Consumption.load(tmp_path) == c
    assert Consumption.load(None) == Consumption()
    assert Consumption.load(tmp_path / "older-checkpoint") == Consumption()
