"""The rollout side of the loop: an engine thread, multi-turn episodes, and the producer that
keeps the engine busy while the learner trains.

Threads: the *engine worker* steps the engine (continuous batching) and hands finished
completions back; the *producer* runs an asyncio loop in which each episode is a coroutine
(env calls such as tool latency overlap freely); the learner (main thread) takes finished
groups from `RolloutProducer.groups` and tells the producer how much more it may launch.
"""

from __future__ import annotations

import asyncio
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bench.chat import render_observation, render_prompt
from bench.engines.base import Completion, Engine, GenerationRequest, SamplingParams
from bench.seeding import derive_seed


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
    info: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

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


@dataclass
class Group:
    """The rollouts of one problem draw (size 1 for single-rollout algorithms)."""

    group_id: int
    problem: Any
    trajectories: list[Trajectory]

    def min_version(self) -> int:
        """The oldest policy version in the group."""
        return min(t.min_version() for t in self.trajectories)


class EngineWorker:
    """Runs `engine.step()` in its own thread; requests arrive from any thread and each
    finished completion is handed to the callback given with its request."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._inbox: queue.Queue = queue.Queue()
        self._callbacks: dict[str, Callable[[Completion], None]] = {}
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="engine-worker", daemon=True)
        self._thread.start()

    def submit(self, request: GenerationRequest, callback: Callable[[Completion], None]) -> None:
        """Queue a request; `callback(completion)` runs on the engine thread when it finishes."""
        self._inbox.put((request, callback))

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                block = not self.engine.has_work()
                try:
                    while True:  # drain everything that arrived; block only when idle
                        request, callback = self._inbox.get(block=block, timeout=0.05)
                        block = False
                        self._callbacks[request.request_id] = callback
                        self.engine.submit(request)
                except queue.Empty:
                    pass
                if self.engine.has_work():
                    for completion in self.engine.step():
                        self._callbacks.pop(completion.request_id)(completion)
        except BaseException as exc:  # surfaced to the learner by the producer
            self.error = exc

    def close(self) -> None:
        """Stop the thread (in-flight requests are abandoned)."""
        self._stop.set()
        self._thread.join(timeout=10)


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
) -> Trajectory:
    """Play one multi-turn episode: model turns from the engine, observations from the env;
    `env.close()` runs at the end, whatever happens."""
    start = time.perf_counter()
    try:
        prompt_ids = render_prompt(tokenizer, await env.reset())
        traj = Trajectory(prompt_key=key, group_id=group_id, prompt_ids=prompt_ids)
        for turn in range(max_turns):
            budget = max_context_tokens - len(prompt_ids) - len(traj.response_ids)
            if budget <= 0:
                traj.truncated = True
                break
            turn_sampling = (
                sampling if budget >= sampling.max_new_tokens else replace(sampling, max_new_tokens=budget)
            )
            request = GenerationRequest(
                request_id=f"{key}/g{group_id}/s{seed}/t{turn}",
                prompt_ids=prompt_ids + traj.response_ids,
                sampling=turn_sampling,
                seed=derive_seed(seed, turn),
            )
            completion = await _generate(worker, request)
            traj.append(completion.token_ids, completion.logprobs, completion.versions)
            traj.turns = turn + 1
            result = await env.step(tokenizer.decode(completion.token_ids, skip_special_tokens=True))
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
        await env.close()  # sandboxes, working copies, containers: released even on failure


class RolloutProducer:
    """Keeps launching groups while the learner allows it; finished groups go to `groups`.

    Flow control is one number: at most `capacity` trajectories may be launched and not yet
    released by the learner. Asynchronous runs release a batch when the learner *takes* it and
    allow one batch of lookahead, so generation overlaps training; synchronous runs release it
    only after the weights are updated and allow no lookahead, so nothing overlaps.
    """

    def __init__(
        self,
        task: Any,
        worker: EngineWorker,
        tokenizer: Any,
        sampling: SamplingParams,
        group_size: int,
        capacity: int,
        seed: int,
        max_context_tokens: int,
        first_group_id: int = 0,
    ) -> None:
        self.task, self.worker, self.tokenizer, self.sampling = task, worker, tokenizer, sampling
        self.group_size, self.capacity, self.seed = group_size, capacity, seed
        self.max_context_tokens = max_context_tokens
        self.groups: queue.Queue[Group] = queue.Queue()
        self.error: BaseException | None = None
        self._next_group_id = first_group_id
        self._rng = random.Random(derive_seed(seed, "problems", first_group_id))
        self._requeued: list[Any] = []
        self._outstanding = 0  # launched and not yet released, in trajectories
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._stopped = False
        self._thread = threading.Thread(target=self._thread_main, name="rollout-producer", daemon=True)

    # ---- called from the learner thread ------------------------------------------------
    def start(self) -> None:
        """Start producing."""
        self._thread.start()

    def release(self, n_trajectories: int) -> None:
        """Allow `n_trajectories` more to be launched (they were consumed or discarded)."""
        with self._lock:
            self._outstanding -= n_trajectories
        self._poke()

    def requeue(self, problem: Any) -> None:
        """Run this problem again (stale_policy = requeue); call `release` as well."""
        with self._lock:
            self._requeued.append(problem)

    def get_group(self, timeout: float = 1.0) -> Group | None:
        """The next finished group, or None after `timeout` seconds; re-raises worker errors."""
        for err in (self.error, self.worker.error):
            if err is not None:
                raise RuntimeError(f"rollout failed: {err!r}") from err
        try:
            return self.groups.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop launching and end the producer thread."""
        self._stopped = True
        self._poke()
        self._thread.join(timeout=10)

    def _poke(self) -> None:
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    # ---- the producer thread ------------------------------------------------------------
    def _thread_main(self) -> None:
        try:
            asyncio.run(self._produce())
        except BaseException as exc:
            self.error = exc

    async def _produce(self) -> None:
        self._loop, self._wake = asyncio.get_running_loop(), asyncio.Event()
        pending: set[asyncio.Task] = set()
        while not self._stopped:
            with self._lock:
                room = self.capacity - self._outstanding >= self.group_size
                if room:
                    self._outstanding += self.group_size
                    problem = self._requeued.pop(0) if self._requeued else self.task.sample_problem(self._rng)
            if room:
                task = asyncio.create_task(self._run_group(self._next_group_id, problem))
                pending.add(task)
                task.add_done_callback(pending.discard)
                self._next_group_id += 1
                continue
            self._wake.clear()
            await self._wake.wait()
        for task in pending:
            task.cancel()

    async def _run_group(self, group_id: int, problem: Any) -> None:
        try:
            episodes = [
                run_episode(
                    self.worker,
                    self.tokenizer,
                    self.task.make_env(problem),
                    self.sampling,
                    derive_seed(self.seed, group_id, member),
                    self.task.max_turns,
                    self.max_context_tokens,
                    problem.key,
                    group_id,
                )
                for member in range(self.group_size)
            ]
            trajectories = await asyncio.gather(*episodes)
            self.groups.put(Group(group_id, problem, list(trajectories)))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc
