"""`RolloutProducer`: keeps the engine busy with groups of episodes while the learner trains."""

from __future__ import annotations

import asyncio
import queue
import random
import threading
from dataclasses import dataclass
from typing import Any

from bench.engines.base import SamplingParams
from bench.errors import RunStopped
from bench.rollout.episode import Trajectory, run_episode
from bench.rollout.worker import EngineWorker
from bench.seeding import derive_seed


@dataclass
class Group:
    """The rollouts of one problem draw (size 1 for single-rollout algorithms)."""

    group_id: int
    problem: Any
    trajectories: list[Trajectory]

    def min_version(self) -> int:
        """The oldest policy version in the group."""
        return min(t.min_version() for t in self.trajectories)


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
            if isinstance(err, RunStopped):  # a stop with its own one-line reason (a lost server)
                raise err
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
