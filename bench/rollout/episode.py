"""One episode: model turns from the engine, observations from the env, into a `Trajectory`.

Training rollouts and evaluation samples are both played by `run_episode`, so a tool call, an
observation, a truncation or a grade is handled identically in both.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.engines.base import Completion, GenerationRequest, SamplingParams
from bench.models.chat import render_observation, render_prompt, thinking_tokens
from bench.rollout.worker import EngineWorker
from bench.seeding import derive_seed

PROMPT_TOO_LONG = "prompt-too-long"
"""Finish reason of an episode whose prompt fills the model's whole context (nothing generated)."""

ENGINE_FAILURES = ("abort", "error")
"""Finish reasons of a turn the engine did not complete (vLLM aborted or failed the request):
the episode ends there, its cut-off action is neither graded nor trained on."""


@dataclass
class Trajectory:
    """One finished episode: the prompt, the response tokens (actions and observations) with
    their roles, the engine's log-probs and the policy version of every action token."""

    prompt_key: str
    group_id: int
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)  # 1 = model action, 0 = observation
    rollout_logp: list[float] = field(default_factory=list)  # 0.0 on observation tokens
    versions: list[int] = field(default_factory=list)  # -1 on observation tokens
    reward: float = 0.0
    truncated: bool = False
    turns: int = 0
    thinking_tokens: int = (
        0  # of the actions, inside <think>...</think> (`bench.models.chat.thinking_tokens`)
    )
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    started_at: float = 0.0  # Unix time the episode started (the timeline's clock)
    finish_reason: str = (
        ""  # of the last turn: the engine's ("eos", "stop", "length", ENGINE_FAILURES) or PROMPT_TOO_LONG
    )
    requests: list[tuple[int, int]] = field(default_factory=list)  # (prompt, new tokens) of each engine turn

    def min_version(self) -> int:
        """The oldest policy version among this trajectory's action tokens."""
        return min((v for v in self.versions if v >= 0), default=0)

    def append(self, ids: list[int], logps: list[float] | None, versions: list[int] | None) -> None:
        """Add response tokens: an action (with log-probs and versions) or an observation."""
        self.response_ids += ids
        if logps is None:
            self.action_mask += [0] * len(ids)
            self.rollout_logp += [0.0] * len(ids)
            self.versions += [-1] * len(ids)
        else:
            self.action_mask += [1] * len(ids)
            self.rollout_logp += list(logps)
            self.versions += list(versions or [])


async def _generate(worker: EngineWorker, request: GenerationRequest) -> Completion:
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    worker.submit(request, lambda c: loop.call_soon_threadsafe(future.set_result, c))
    return await future


async def run_episode(
    worker: EngineWorker,
    tokenizer: Any,
    env: Any,
    sampling: SamplingParams,
    seed: int,
    max_turns: int,
    max_context_tokens: int,
    key: str,
    group_id: int,
    seed_of_turn: Callable[[int], int] | None = None,
) -> Trajectory:
    """Play one episode: model turns from the engine, observations from the env, until the env
    is done, the turns run out or the context is full; `env.close()` runs at the end, whatever
    happens. An exception from `env.step` or `env.close` ends the episode with reward 0 and
    `info["env_error"]` (counted as `rollout/env_failed`), never the run. Turn t samples with
    seed `seed_of_turn(t)` (default `derive_seed(seed, t)`)."""
    start, started_at = time.perf_counter(), time.time()
    traj = None
    try:
        prompt_ids = render_prompt(tokenizer, await env.reset())
        traj = Trajectory(prompt_key=key, group_id=group_id, prompt_ids=prompt_ids, started_at=started_at)
        for turn in range(max_turns):
            budget = max_context_tokens - len(prompt_ids) - len(traj.response_ids)
            if budget <= 0:
                traj.truncated = True
                traj.finish_reason = PROMPT_TOO_LONG if turn == 0 else "length"
                break
            turn_sampling = (
                sampling if budget >= sampling.max_new_tokens else replace(sampling, max_new_tokens=budget)
            )
            request = GenerationRequest(
                request_id=f"{key}/g{group_id}/s{seed}/t{turn}",
                prompt_ids=prompt_ids + traj.response_ids,
                sampling=turn_sampling,
                seed=derive_seed(seed, turn) if seed_of_turn is None else seed_of_turn(turn),
            )
            completion = await _generate(worker, request)
            traj.requests.append((len(request.prompt_ids), len(completion.token_ids)))  # its compute
            traj.append(completion.token_ids, completion.logprobs, completion.versions)
            traj.turns = turn + 1
            traj.finish_reason = completion.finish_reason
            if completion.finish_reason in ENGINE_FAILURES:
                traj.truncated = True  # not the model's ending: `collect_batch` runs the problem again
                break
            action = tokenizer.decode(completion.token_ids, skip_special_tokens=True)
            traj.thinking_tokens += thinking_tokens(tokenizer, action)
            try:
                result = await env.step(action)
            except Exception as exc:  # the env failed on the model's action: its end, reward 0
                traj.info = {"env_error": f"step: {type(exc).__name__}: {exc}"[:500]}
                break
            traj.truncated = completion.finish_reason == "length"
            if result.done:
                traj.reward, traj.info = float(result.reward), dict(result.info)
                break
            observation = render_observation(
                tokenizer, result.observation or "", env.observation_role, completion.token_ids
            )
            traj.append(observation, None, None)
        else:
            traj.truncated = True  # turn limit reached without the env finishing: reward stays 0
        traj.seconds = time.perf_counter() - start
        return traj
    finally:
        try:
            await env.close()  # sandboxes, working copies, containers: released even on failure
        except Exception as exc:  # what the model's code left behind must not stop the run
            if traj is not None:
                traj.info.setdefault("env_error", f"close: {type(exc).__name__}: {exc}"[:500])
