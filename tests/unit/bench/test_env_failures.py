"""An env that fails on the model's action ends that episode, never the run (issue 34, item 3):
`run_episode` turns an exception from `env.step` or `env.close` into the episode's end with
reward 0 and `info["env_error"]`, `ToolEnv` does the same for `finish`, and each step's
metrics count such episodes as `rollout/env_failed`."""

from __future__ import annotations

import asyncio

import pytest

from bench.engines.base import Completion, SamplingParams
from bench.rollout.episode import Trajectory, run_episode
from bench.rollout.producer import Group
from bench.train.metrics import batch_metrics
from envs.base import Env, StepResult
from envs.tool_env import ToolEnv


class _Tokenizer:
    bos_token_id = None
    chat_template = None

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 50 for c in text]

    def decode(self, ids, skip_special_tokens=True):
        return "answer"


class _Worker:
    def submit(self, request, callback):
        callback(Completion(request.request_id, request.prompt_ids, [1, 2], [-0.5, -0.5], [0, 0], "stop"))


class _FailingEnv(Env):
    """Fails in `where` ("step", "close", "both", or at the second step: "later")."""

    def __init__(self, where: str):
        self.where, self.steps, self.closed = where, 0, 0

    async def reset(self):
        return [{"role": "user", "content": "q"}]

    async def step(self, action):
        self.steps += 1
        if self.where in ("step", "both") or (self.where == "later" and self.steps == 2):
            raise OSError("[Errno 40] Too many levels of symbolic links: 'a'")
        return StepResult(observation="obs", reward=0.0, done=self.steps == 3, info={})

    async def close(self):
        self.closed += 1
        if self.where in ("close", "both"):
            raise RecursionError("maximum recursion depth exceeded")


def play(env) -> Trajectory:
    return asyncio.run(
        run_episode(_Worker(), _Tokenizer(), env, SamplingParams(max_new_tokens=4), 0, 5, 10_000, "k", 0)
    )


@pytest.mark.parametrize(
    "where, turns, error",
    [
        ("step", 1, "step: OSError"),
        ("later", 2, "step: OSError"),
        ("close", 3, "close: RecursionError"),
        ("both", 1, "step: OSError"),
    ],
)
def test_env_failures_end_the_episode_with_reward_zero(where, turns, error):
    env = _FailingEnv(where)
    traj = play(env)
    assert traj.reward == 0.0 and traj.turns == turns and env.closed == 1
    assert traj.info["env_error"].startswith(error)


def test_a_cancelled_episode_still_raises():
    class Cancelled(_FailingEnv):
        async def step(self, action):
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        play(Cancelled("none"))


class _Finishing(ToolEnv):
    def initial_messages(self):
        return [{"role": "user", "content": "q"}]

    def tools(self):
        return {}

    async def finish(self, action):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")


def test_a_tool_env_whose_finish_fails_ends_with_reward_zero():
    env = _Finishing()
    asyncio.run(env.reset())
    result = asyncio.run(env.step("my final answer"))
    assert (
        result.done
        and result.reward == 0.0
        and result.info["env_error"].startswith("finish: UnicodeDecodeError")
    )


def test_step_metrics_count_the_failed_episodes():
    def traj(info):
        return Trajectory("k", 0, [1], [2], [1], [-0.1], [0], reward=0.0, info=info)

    group = Group(
        group_id=0,
        problem=None,
        trajectories=[traj({}), traj({"env_error": "step: x"}), traj({"env_error": "close: y"})],
    )
    assert batch_metrics([group], 0)["rollout/env_failed"] == 2.0
