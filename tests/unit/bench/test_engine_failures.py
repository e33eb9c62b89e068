"""A request the engine aborted or failed (vLLM's "abort"/"error") is not the model's answer:
the episode stops there ungraded, and training runs the problem again instead of learning
from a cut-off action scored 0."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from bench.engines.base import Completion, SamplingParams
from bench.rollout.episode import Trajectory, run_episode
from bench.rollout.producer import Group
from bench.train import collect
from bench.train.distributed import Dist
from envs.base import Env, StepResult


class _Tokenizer:
    bos_token_id = None
    chat_template = None

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 50 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(97 + i % 26) for i in ids)


class _Worker:
    """Answers every request at once with the next finish reason of `reasons`."""

    def __init__(self, reasons):
        self.reasons = list(reasons)

    def submit(self, request, callback):
        reason = self.reasons.pop(0)
        callback(Completion(request.request_id, request.prompt_ids, [1, 2], [-0.5, -0.5], [0, 0], reason))


class _TwoTurnEnv(Env):
    def __init__(self):
        self.actions, self.closed = [], False

    async def reset(self):
        return [{"role": "user", "content": "q"}]

    async def step(self, action):
        self.actions.append(action)
        if len(self.actions) == 2:
            return StepResult(observation=None, reward=1.0, done=True, info={})
        return StepResult(observation="obs", reward=0.0, done=False, info={})

    async def close(self):
        self.closed = True


def _play(reasons):
    env = _TwoTurnEnv()
    traj = asyncio.run(
        run_episode(_Worker(reasons), _Tokenizer(), env, SamplingParams(max_new_tokens=4), 0, 4, 512, "p", 0)
    )
    return env, traj


@pytest.mark.parametrize("reason", ["abort", "error"])
def test_an_engine_failure_ends_the_episode_ungraded(reason):
    env, traj = _play(["eos", reason])
    assert env.actions == ["bc"]  # the first turn was graded, the cut-off second one never
    assert env.closed
    assert (traj.finish_reason, traj.truncated, traj.turns, traj.reward) == (reason, True, 2, 0.0)


def test_a_natural_end_is_graded():
    env, traj = _play(["eos", "eos"])
    assert len(env.actions) == 2 and traj.reward == 1.0 and traj.finish_reason == "eos"


class _Producer:
    def __init__(self, groups):
        self.groups, self.requeued, self.released = list(groups), [], 0

    def get_group(self, timeout=1.0):
        return self.groups.pop(0)

    def requeue(self, problem):
        self.requeued.append(problem)

    def release(self, n):
        self.released += n


def _group(gid, reasons):
    trajs = [Trajectory("p", gid, [1], versions=[0], reward=1.0, finish_reason=r) for r in reasons]
    return Group(gid, f"problem-{gid}", trajs)


def _learner():
    algo = SimpleNamespace(accept_group=lambda rewards: True)
    return SimpleNamespace(version=0, algo=algo, dist=Dist())  # one rank: collects the whole batch


def test_a_group_with_an_engine_failure_is_run_again_not_trained_on():
    producer = _Producer([_group(0, ["eos", "abort"]), _group(1, ["eos", "length"])])
    config = SimpleNamespace(trajectories_per_step=2, stale_policy="drop")
    got = collect.collect_batch(producer, _learner(), config, max_staleness=4)
    assert [g.group_id for g in got.groups] == [1]
    assert producer.requeued == ["problem-0"] and producer.released == 2
    assert got.engine_failed == 2 and got.generated()[0] == 4  # the failed group was generated


def test_an_engine_that_fails_every_request_stops_the_run(monkeypatch):
    monkeypatch.setattr(collect, "MAX_REJECTED_IN_A_ROW", 3)
    producer = _Producer([_group(i, ["error"]) for i in range(3)])
    config = SimpleNamespace(trajectories_per_step=1, stale_policy="drop")
    with pytest.raises(RuntimeError, match="aborted or failed a request in 3 groups in a row"):
        collect.collect_batch(producer, _learner(), config, max_staleness=4)
