"""Episodes' environments on Ray actors where a cluster has CPUs (`env_workers`, under
`bench run --cluster ray`).

An episode's CPU work besides generation is its environment's: the tool calls, the sandboxes
that run the model's code, a SWE episode's working copy, tests and containers. With
`env_workers = N` the placer (`bench.ray_placement`) starts N `EnvHost` actors, 1 CPU each,
spread by Ray over the nodes with free CPUs, and names them to the learner
(`ENV_WORKERS_VARIABLE`). The learner's producer keeps scheduling episodes and talking to the
engine; each episode's `reset`, `step` and `close` run on one env worker (`RemoteEnv`), the
next episode on the next worker. What an environment returns is the same object it returns in
the learner's own process (a test holds them equal), so rewards do not depend on where it ran.

Faults: an env worker lost mid-episode fails that episode's step (reward 0, `env_error`, as any
environment failure); the episodes after it go to the live workers; when none is left the run
stops (`RunStopped`) and `bench run --resume` continues it. The in-training evaluation runs its
environments in the learner's process, as without env workers.
"""

from __future__ import annotations

import itertools
import os
import socket
from typing import Any

from bench.errors import RunStopped, UsageError

ENV_WORKERS_VARIABLE = "BENCH_ENV_WORKERS"
"""The env workers' actor names, comma-separated, that the placer gives the learner."""
NAMESPACE = "bench"
"""The Ray namespace of bench's named actors (learners, env workers; `sweeps.ray_cluster`'s too):
how a user or a test finds them (`ray.get_actor(name, namespace="bench")`)."""


class EnvHost:
    """A Ray actor holding the environments of many concurrent episodes of one task (module
    docstring); its async methods run on the actor's event loop, so episodes overlap on it."""

    def __init__(self, task: str, task_args: dict[str, Any]) -> None:
        from envs import registry

        self.task = registry.make(task, **task_args)
        self.envs: dict[str, Any] = {}
        self.episodes = 0

    def where(self) -> str:
        """'host node abcd1234': where this worker runs."""
        import ray

        return f"{socket.gethostname()} node {ray.get_runtime_context().get_node_id()[:8]}"

    def stats(self) -> dict[str, Any]:
        """Where it runs, the episodes it has started and those still open."""
        return {"where": self.where(), "episodes": self.episodes, "open": len(self.envs)}

    async def reset(self, env_id: str, problem: Any) -> tuple[list[Any], str]:
        """Make the episode's environment for `problem` and reset it: its first messages and the
        role its observations are rendered under."""
        env = self.task.make_env(problem)
        self.envs[env_id] = env
        self.episodes += 1
        return await env.reset(), env.observation_role

    async def step(self, env_id: str, action: str) -> Any:
        """The episode's `Env.step(action)`."""
        return await self.envs[env_id].step(action)

    async def close(self, env_id: str) -> None:
        """Close the episode's environment (a second close is a no-op)."""
        env = self.envs.pop(env_id, None)
        if env is not None:
            await env.close()

    async def close_all(self) -> int:
        """Close every open environment (a lost learner's episodes); how many there were."""
        ids = list(self.envs)
        for env_id in ids:
            try:
                await self.close(env_id)
            except Exception:  # what a model's code left behind must not keep the others open
                pass
        return len(ids)


class EnvWorkers:
    """The learner's handles on the env workers, taken in turn; a lost one is left out."""

    def __init__(self, ray: Any, names: list[str]) -> None:
        self.ray, self.names = ray, names
        self.actors = {name: ray.get_actor(name, namespace=NAMESPACE) for name in names}
        self._turn = itertools.cycle(names)
        self.lost: set[str] = set()

    def next(self) -> tuple[str, Any]:
        """The next live worker (name, handle); RunStopped when every one is lost."""
        for _ in range(len(self.names)):
            name = next(self._turn)
            if name not in self.lost:
                return name, self.actors[name]
        raise RunStopped(
            f"every env worker is lost ({', '.join(self.names)}); resume the run with bench run --resume"
        )


class RemoteEnv:
    """One episode's environment, played on an env worker (an `envs.base.Env` to the episode)."""

    observation_role = "user"
    _ids = itertools.count()

    def __init__(self, workers: EnvWorkers, problem: Any) -> None:
        self.workers, self.problem = workers, problem
        self.id = f"{os.getpid()}-{next(self._ids)}"
        self.actor: Any = None

    async def reset(self) -> list[Any]:
        """Reset on the next live worker (a worker found lost is left out and the next tried)."""
        while True:
            name, actor = self.workers.next()
            try:
                messages, self.observation_role = await actor.reset.remote(self.id, self.problem)
            except self.workers.ray.exceptions.RayActorError:
                self.workers.lost.add(name)
                continue
            self.actor = actor
            return messages

    async def step(self, action: str) -> Any:
        """The environment's step, on its worker."""
        return await self.actor.step.remote(self.id, action)

    async def close(self) -> None:
        """Close it on its worker (nothing to close when reset never reached one)."""
        if self.actor is not None:
            await self.actor.close.remote(self.id)


class RemoteEnvTask:
    """A task whose `make_env` plays episodes on env workers; everything else is the task's."""

    def __init__(self, task: Any, workers: EnvWorkers) -> None:
        self._task, self.workers = task, workers

    def make_env(self, problem: Any) -> RemoteEnv:
        """The episode's environment, on an env worker."""
        return RemoteEnv(self.workers, problem)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._task, name)


def refuse_off_ray(env_workers: int) -> None:
    """A one-line UsageError for env workers where no Ray placer started them (nothing when
    `env_workers` is 0)."""
    if env_workers:
        raise UsageError(
            f"env_workers={env_workers} places the episodes' environments on Ray actors; add "
            "--cluster ray, or set env_workers=0"
        )


def on_env_workers(task: Any, env_workers: int, environ: Any = None) -> Any:
    """`task` with its episodes' environments on the env workers the placer named (the task
    itself when `env_workers` is 0); a UsageError when none were named (not placed on Ray)."""
    if not env_workers:
        return task
    environ = os.environ if environ is None else environ
    names = [n for n in environ.get(ENV_WORKERS_VARIABLE, "").split(",") if n]
    if len(names) != env_workers:
        refuse_off_ray(env_workers)
    import ray

    if not ray.is_initialized():
        address = environ.get("RAY_ADDRESS") or "auto"
        ray.init(address=address, namespace=NAMESPACE, logging_level="WARNING", log_to_driver=False)
    return RemoteEnvTask(task, EnvWorkers(ray, names))
