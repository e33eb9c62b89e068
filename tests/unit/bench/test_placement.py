"""`bench run` placing its own learner ranks and servers (`bench.placement`): the layout against
the visible GPUs and the config checks, each a one-line UsageError before anything starts."""

from __future__ import annotations

import pytest

from bench.config import RunConfig, validate
from bench.errors import UsageError
from bench.placement import Layout, places_processes, plan_layout


def _config(**fields) -> RunConfig:
    return RunConfig(algo="grpo", task="arith", **fields)


def test_learners_get_the_first_gpus_one_each():
    assert plan_layout(_config(learner_ranks=2), ["0", "1", "2"]) == Layout("0,1", 0)


def test_more_learner_ranks_than_gpus_is_refused():
    with pytest.raises(UsageError, match=r"learner_ranks=3: one GPU per rank and 2 are visible \(0,1\)"):
        plan_layout(_config(learner_ranks=3), ["0", "1"])


def test_servers_on_gpus_are_refused_until_the_nccl_transfer_exists():
    config = _config(engine="http", rollout_servers=1)
    with pytest.raises(UsageError, match="rollout_servers=1: vLLM servers on GPUs need the learner side"):
        plan_layout(config, ["0", "1"])


def test_without_gpus_servers_are_cpu_doubles():
    assert plan_layout(_config(engine="http", rollout_servers=2, learner_ranks=2), []) == Layout(None, 2)


def test_only_more_ranks_or_servers_place_processes_and_never_under_a_launcher(monkeypatch):
    assert not places_processes(_config())
    assert places_processes(_config(learner_ranks=2))
    assert places_processes(_config(engine="http", rollout_servers=1))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert not places_processes(_config(learner_ranks=2))  # a launched rank trains


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"learner_ranks": 0}, "learner_ranks must be >= 1 and rollout_servers >= 0, got 0 and 0"),
        (
            {"rollout_servers": 1},
            "rollout_servers=1: servers are reached through the http engine; add --engine http",
        ),
        (
            {"engine": "http", "rollout_servers": 1, "rollout_urls": "http://127.0.0.1:1"},
            "rollout_servers=1 starts servers and rollout_urls names others: set one of them",
        ),
    ],
)
def test_placement_settings_that_cannot_work_are_refused(fields, needle):
    with pytest.raises(UsageError, match=needle):
        validate(_config(**fields))


def test_learner_ranks_must_match_a_launch(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    validate(_config(learner_ranks=2))
    validate(_config())  # the default: the launch decides
    with pytest.raises(UsageError, match="learner_ranks=4 under a launcher of 2 ranks"):
        validate(_config(learner_ranks=4))
