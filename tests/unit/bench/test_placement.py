"""`bench run` placing its own learner ranks and servers (`bench.placement`): the layout against
the visible GPUs and the config checks, each a one-line UsageError before anything starts."""

from __future__ import annotations

import pytest

from bench.config import RunConfig, validate
from bench.errors import UsageError
from bench.placement import Layout, places_processes, plan_layout


def _config(**fields) -> RunConfig:
    return RunConfig(algo="grpo", task="arith", **fields)


def _servers(**fields) -> RunConfig:
    # built without validation: weight_transfer=nccl is checked against this machine's CUDA there
    return RunConfig(algo="grpo", task="arith", engine="http", weight_transfer="nccl", **fields)


def test_learners_get_the_first_gpus_then_each_server_its_tp():
    assert plan_layout(_config(learner_ranks=2), ["0", "1", "2"]) == Layout("0,1", [])
    config = _servers(learner_ranks=2, rollout_servers=2, rollout_tp=2)
    assert plan_layout(config, list("0123456")) == Layout("0,1", ["2,3", "4,5"])


def test_a_layout_larger_than_the_visible_gpus_is_refused():
    config = _servers(learner_ranks=2, rollout_servers=2, rollout_tp=2)
    with pytest.raises(UsageError, match=r"need 6 GPUs and 4 are visible \(0,1,2,3\); lower them"):
        plan_layout(config, ["0", "1", "2", "3"])


def test_servers_on_gpus_need_the_nccl_transfer():
    config = _config(engine="http", rollout_servers=1)
    with pytest.raises(
        UsageError, match="starts vllm serve, which takes weights over NCCL: add --set weight_transfer=nccl"
    ):
        plan_layout(config, ["0", "1"])


def test_without_gpus_servers_are_cpu_doubles_of_one_process():
    assert plan_layout(_config(engine="http", rollout_servers=2, learner_ranks=2), []) == Layout(
        None, [None, None]
    )
    with pytest.raises(UsageError, match="rollout_tp=2: tensor parallelism needs GPUs"):
        plan_layout(_config(engine="http", rollout_servers=1, rollout_tp=2), [])


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
        (
            {"learner_ranks": 0},
            "learner_ranks and rollout_tp must be >= 1 and rollout_servers >= 0, got 0, 1 and 0",
        ),
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


def test_the_nccl_transfer_is_refused_where_it_cannot_run():
    with pytest.raises(
        UsageError, match="weight_transfer=nccl: only the http engine moves weights to servers"
    ):
        validate(_config(weight_transfer="nccl"))
    # this machine has no vLLM or no CUDA: the http engine's NCCL transfer says which, in one line
    with pytest.raises(
        UsageError, match="weight_transfer=nccl (uses vLLM's trainer-side NCCL engine|needs the learner)"
    ):
        validate(_config(engine="http", rollout_servers=1, weight_transfer="nccl"))


def test_the_global_batch_is_checked_against_the_ranks_to_be_placed():
    from bench.config import build_run

    with pytest.raises(
        UsageError, match="must divide by 2 learner ranks x grpo's 8 rollouts per prompt = 16"
    ):
        build_run({"algo": "grpo", "task": "arith", "learner_ranks": 2, "trajectories_per_step": 8})
    build_run({"algo": "grpo", "task": "arith", "learner_ranks": 2, "trajectories_per_step": 16})
