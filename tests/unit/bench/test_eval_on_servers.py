"""In-training evaluation on the run's inference servers: the loop pushes the current policy
first when the weight-sync cadence left the servers behind, and only then."""

from __future__ import annotations

from types import SimpleNamespace

from bench.train import loop
from bench.train.distributed import Dist


class _Engine:
    def __init__(self) -> None:
        self.pushed: list[int] = []

    def update_weights(self, state_dict, version: int) -> None:
        self.pushed.append(version)


def _setup(engine_name: str, synced: int, version: int, monkeypatch):
    monkeypatch.setattr(loop, "policy_weights", lambda learner: {"w": version})
    engine = _Engine()
    rollouts = SimpleNamespace(engine=engine, synced_version=synced)
    learner = SimpleNamespace(version=version, dist=Dist())
    return SimpleNamespace(engine=engine_name), learner, rollouts, engine


def test_servers_behind_the_learner_get_the_current_policy_before_evaluating(monkeypatch):
    config, learner, rollouts, engine = _setup("http", synced=0, version=2, monkeypatch=monkeypatch)
    loop._servers_hold_the_policy(config, learner, rollouts)
    assert engine.pushed == [2] and rollouts.synced_version == 2


def test_servers_already_current_or_another_engine_get_no_push(monkeypatch):
    config, learner, rollouts, engine = _setup("http", synced=2, version=2, monkeypatch=monkeypatch)
    loop._servers_hold_the_policy(config, learner, rollouts)
    config, learner, rollouts, other = _setup("torch", synced=0, version=2, monkeypatch=monkeypatch)
    loop._servers_hold_the_policy(config, learner, rollouts)  # the torch engine evaluates a policy copy
    assert engine.pushed == [] and other.pushed == [] and rollouts.synced_version == 0
