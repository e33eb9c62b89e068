"""`bench run --cluster ray`: one run's processes placed on a Ray cluster, the same parts as on
one node (`bench.placement`) but on whichever nodes have room.

* **Placement groups**: the learner's, one bundle per learner node (`learner_ranks / N` GPUs and
  1 CPU each; N = `--learner-nodes`, STRICT_SPREAD: N distinct nodes; one node: PACK), and the
  servers', one bundle per rollout server (`rollout_tp` GPUs, 1 CPU), PACK: Ray puts them on as
  few nodes as it can and spreads them when one node cannot hold them all (no GPUs are asked on
  a cluster without any). Placing waits at most `PLACE_TIMEOUT_S`.
* **Servers**: one Ray actor per server bundle starts it on its node listening on every
  interface (a CPU double server, or `vllm serve` where the node has real GPUs) and answers its
  URL with the node's address. Weights reach them as on one node (the http engine; the trainer
  tells a remote server an address of its own host for the transfer store).
* **Learner**: one Ray actor per learner bundle runs torchrun of `bench run ...` with the
  servers' URLs (`--standalone` on one node; several: `--nnodes N --node-rank i` with the first
  actor's node as the rendezvous, so the ranks form one FSDP2 world across nodes); this process
  waits for them. When any of them is lost (its node died, or it was killed), the others are
  stopped (their peers are gone) and new ones start in the same bundles (Ray places a lost
  node's bundle again where resources allow) with `bench run --resume`, up to
  `MAX_LEARNER_RESTARTS` times; the run resumes from its last intact checkpoint and its
  events.jsonl records the resume. Servers stay up across learner restarts.
* **Env workers** (`env_workers = N`): N actors of 1 CPU each, started once the learner's and
  servers' bundles are placed and spread by Ray over the nodes with CPUs left, hold the training episodes' environments (`bench.rollout.remote_env`); the learner
  finds them by name. They stay up across learner restarts (a lost learner's open episodes are
  closed first); each one's episode count is printed when the run ends.

Logical GPUs (a simulated cluster) are bookkeeping only: without an NVIDIA GPU the actors run on
CPU (gloo between the learner nodes).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.rollout.remote_env import ENV_WORKERS_VARIABLE, NAMESPACE, EnvHost
from results.rundir import ATTEMPT_PID_VARIABLE, die_with_parent

MAX_LEARNER_RESTARTS = 3
"""New learner actors after a lost one, before the run is given up."""
PLACE_TIMEOUT_S = 600.0
"""How long the run waits for the cluster to hold its placement group."""
BUSY_WAIT_S = 120.0
"""How long a new learner waits for a lost one's ranks to release the run directory."""


def learner_actor_name(out: Path, node_rank: int = 0) -> str:
    """The Ray name of the learner actor of learner node `node_rank` of the run in `out`
    (namespace `NAMESPACE`): how a user or a test finds it (`ray.get_actor(name,
    namespace="bench")`)."""
    return f"bench-learner-{_run_digest(out)}-{node_rank}"


def env_worker_name(out: Path, i: int) -> str:
    """The Ray name of env worker `i` of the run in `out` (namespace `NAMESPACE`)."""
    return f"bench-env-{_run_digest(out)}-{i}"


def _run_digest(out: Path) -> str:
    """12 hex digits naming the run in `out` among the cluster's actors."""
    return hashlib.sha1(str(Path(out).resolve()).encode()).hexdigest()[:12]


def _real_gpus() -> bool:
    import torch

    return torch.cuda.is_available()


class ServerActor:
    """A rollout server on its node (module docstring)."""

    def __init__(self) -> None:
        self.server: Any = None

    def start(self, model: str, slots: int, tp: int) -> tuple[str, str]:
        """Start the server; (its URL with this node's address, this node's id)."""
        import ray

        from bench.engines.server_procs import start_double, start_vllm

        if _real_gpus():
            self.server = start_vllm(model, os.environ["CUDA_VISIBLE_DEVICES"], tp, host="0.0.0.0")
        else:
            self.server = start_double(model, slots=slots, host="0.0.0.0")
        address = ray.util.get_node_ip_address()
        return self.server.url.replace("0.0.0.0", address), ray.get_runtime_context().get_node_id()

    def stop(self) -> None:
        """Stop the server."""
        if self.server is not None:
            self.server.stop()


class LearnerActor:
    """The learner ranks of the run on their node (module docstring)."""

    def node(self) -> str:
        """This node's id."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def rendezvous(self) -> tuple[str, int]:
        """(this node's address, a port free on it): where the learner nodes' torchrun meet."""
        import ray

        from bench.engines.weight_wire import free_port

        return ray.util.get_node_ip_address(), free_port()

    def train(self, cmd: list[str], out: str, env_workers: list[str]) -> int:
        """Run `cmd` (torchrun of `bench run` for the run in `out`) to its end, with the names
        of the `env_workers` it plays episodes on; its exit code. A run directory still held by
        a lost attempt's ranks (they checkpoint on SIGTERM, then let go) is waited for,
        `BUSY_WAIT_S` at most."""
        import ray

        from results.rundir import RunDir

        env = {**os.environ, ATTEMPT_PID_VARIABLE: str(os.getpid())}
        if env_workers:
            env.update(
                {
                    ENV_WORKERS_VARIABLE: ",".join(env_workers),
                    "RAY_ADDRESS": ray.get_runtime_context().gcs_address,
                }
            )
        if not _real_gpus():
            env.pop("CUDA_VISIBLE_DEVICES", None)
        run, deadline = RunDir(out), time.monotonic() + BUSY_WAIT_S
        while (run.path / "config.json").exists() and run.is_locked() and time.monotonic() < deadline:
            time.sleep(1.0)
        # SIGTERM with the actor: torchrun stops its ranks, which checkpoint and release the run.
        # A killed actor's children are SIGKILLed by Ray instead; then each rank's own request
        # (`stop_with_launcher`, ATTEMPT_PID_VARIABLE set here) ends it the same way
        term_with_actor = functools.partial(die_with_parent, signal.SIGTERM)
        return subprocess.Popen(cmd, env=env, preexec_fn=term_with_actor).wait()


def _bundle(cpus: float, gpus: int) -> dict[str, float]:
    return {"CPU": cpus, **({"GPU": float(gpus)} if gpus else {})}


def _placement_group(ray: Any, bundles: list[dict], strategy: str, what: str) -> Any:
    """A placement group of `bundles`, once the cluster holds it (a UsageError after
    `PLACE_TIMEOUT_S`)."""
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group(bundles, strategy=strategy)
    ready, _ = ray.wait([group.ready()], timeout=PLACE_TIMEOUT_S)
    if not ready:
        remove_placement_group(group)
        raise UsageError(f"the Ray cluster did not hold {what} within {PLACE_TIMEOUT_S:.0f} s")
    return group


def _in_bundle(group: Any, i: int, gpus: int) -> dict[str, Any]:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)
    return {"scheduling_strategy": strategy, "num_cpus": 1, "num_gpus": gpus}


@dataclass(frozen=True)
class EnvWorker:
    """One placed env worker: its Ray name, its actor and where Ray put it."""

    name: str
    actor: Any
    where: str


def _start_env_workers(ray: Any, config: Any, out: Path) -> list[EnvWorker]:
    """The run's env workers, each placed on a node with a free CPU (module docstring); a
    UsageError when the cluster did not place them within `PLACE_TIMEOUT_S`."""
    host_cls = ray.remote(EnvHost)
    names = [env_worker_name(out, i) for i in range(config.env_workers)]
    options = {"namespace": NAMESPACE, "num_cpus": 1, "scheduling_strategy": "SPREAD"}
    actors = [host_cls.options(name=name, **options).remote(config.task, config.task_args) for name in names]
    try:
        wheres = ray.get([actor.where.remote() for actor in actors], timeout=PLACE_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        raise UsageError(
            f"the Ray cluster did not place {config.env_workers} env worker(s) of 1 CPU within "
            f"{PLACE_TIMEOUT_S:.0f} s; lower env_workers or add CPUs"
        ) from None
    return [EnvWorker(*placed) for placed in zip(names, actors, wheres, strict=True)]


def check_learner_nodes(ranks: int, nodes: int) -> None:
    """`learner_nodes` must split `learner_ranks` evenly (a UsageError, one line)."""
    if nodes < 1 or ranks % nodes:
        raise UsageError(
            f"--learner-nodes {nodes}: learner_ranks={ranks} must split evenly over the nodes (ranks per node "
            "= learner_ranks / learner nodes)"
        )


def place_on_ray(
    ray: Any, argv: list[str], config: Any, out: Path, fresh: bool, has_gpus: bool, learner_nodes: int = 1
) -> int:
    """Place the run of `config` in `out` on the connected cluster (module docstring): `argv`
    is the user's `bench run` command line, `fresh` whether it starts a new run (else it
    resumes `out`), `learner_nodes` the nodes its learner ranks spread over; the learners' exit
    code (the first non-zero one)."""
    from ray.util.placement_group import remove_placement_group

    from bench.placement import server_model

    ranks, servers, tp = config.learner_ranks, config.rollout_servers, config.rollout_tp
    check_learner_nodes(ranks, learner_nodes)
    per_node = ranks // learner_nodes
    learner_gpus, server_gpus = (per_node, tp) if has_gpus else (0, 0)
    strategy = "STRICT_SPREAD" if learner_nodes > 1 else "PACK"
    groups = [
        _placement_group(
            ray,
            [_bundle(1, learner_gpus)] * learner_nodes,
            strategy,
            f"{learner_nodes} learner node(s) of {per_node} rank(s)",
        )
    ]
    actors: list[Any] = []  # the servers'
    env_workers: list[EnvWorker] = []
    try:
        started: list[tuple[str, str]] = []
        if servers:
            groups.append(
                _placement_group(ray, [_bundle(1, server_gpus)] * servers, "PACK", f"{servers} server(s)")
            )
            server_cls = ray.remote(ServerActor)
            actors = [
                server_cls.options(**_in_bundle(groups[1], i, server_gpus)).remote() for i in range(servers)
            ]
            started = ray.get([a.start.remote(server_model(config), config.engine_slots, tp) for a in actors])
        # after the learner's and servers' bundles hold their nodes: env workers take the CPUs left
        # (first, one could take the only CPU of the GPU node a server bundle needs, and it would wait)
        env_workers = _start_env_workers(ray, config, out)
        first = [*argv, *(["--out", str(out)] if fresh else []), "--no-progress"]
        learners = [_in_bundle(groups[0], i, learner_gpus) for i in range(learner_nodes)]
        code = _train(ray, learners, first, out, started, per_node, env_workers)
        _report_env_workers(ray, env_workers)
        return code
    finally:
        for actor in actors:
            try:
                ray.get(actor.stop.remote(), timeout=60)
            except Exception:  # already gone with its node: nothing left to stop
                pass
        for worker in env_workers:  # the run is over: its env workers end with it
            with contextlib.suppress(Exception):
                ray.kill(worker.actor)
        for group in groups:
            remove_placement_group(group)


def _torchrun(per_node: int, nodes: int, rank: int, master: tuple[str, int]) -> list[str]:
    """torchrun's arguments for node `rank` of `nodes` (one node: standalone)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(per_node)]
    if nodes == 1:
        return cmd + ["--standalone"]
    address, port = master
    return cmd + [
        "--nnodes",
        str(nodes),
        "--node-rank",
        str(rank),
        "--master-addr",
        address,
        "--master-port",
        str(port),
    ]


def _report_env_workers(ray: Any, env_workers: list[EnvWorker]) -> None:
    """One stderr line: where each env worker ran and how many episodes it started."""
    if not env_workers:
        return
    try:
        stats = ray.get([worker.actor.stats.remote() for worker in env_workers], timeout=60)
    except Exception:  # a worker lost at the very end: nothing to report from it
        return
    text = "; ".join(f"{s['where']}: {s['episodes']} episodes" for s in stats)
    print(f"bench: env workers: {text}", file=sys.stderr, flush=True)


def _train(
    ray: Any,
    learners: list[dict],
    argv: list[str],
    out: Path,
    servers: list[tuple[str, str]],
    per_node: int,
    env_workers: list[EnvWorker],
) -> int:
    """Run the learner actors (one per learner node), and resuming ones after each loss of any
    of them (module docstring)."""
    learner_cls = ray.remote(LearnerActor)
    urls = ",".join(url for url, _ in servers)
    nodes = len(learners)
    for attempt in range(MAX_LEARNER_RESTARTS + 1):
        if attempt and (out / "config.json").exists():
            argv = ["run", "--resume", str(out), "--no-progress"]
        bench_args = ["-m", "bench.cli", *argv, *(["--set", f"rollout_urls={urls}"] if urls else [])]
        actors = [
            learner_cls.options(**options, name=learner_actor_name(out, i), namespace=NAMESPACE).remote()
            for i, options in enumerate(learners)
        ]
        try:
            master = ray.get(actors[0].rendezvous.remote())
            placed = ray.get([a.node.remote() for a in actors])
            where = f"learner ({nodes} node(s) x {per_node} rank(s)) on node(s) " + ",".join(
                n[:8] for n in placed
            )
            where += "".join(f"; server {url} on node {n[:8]}" for url, n in servers)
            if env_workers:
                where += f"; {len(env_workers)} env worker(s) on " + ", ".join(w.where for w in env_workers)
            print(f"bench: placed on ray: {where}", file=sys.stderr, flush=True)
            names = [worker.name for worker in env_workers]
            runs = [
                a.train.remote(_torchrun(per_node, nodes, i, master) + bench_args, str(out), names)
                for i, a in enumerate(actors)
            ]
            codes = ray.get(runs)
            return next((c for c in codes if c), 0)
        except ray.exceptions.RayActorError as exc:
            for actor in actors:  # one node lost: its peers cannot go on; all start again
                ray.kill(actor)
            for worker in env_workers:  # the lost learner's episodes will not be played on
                with contextlib.suppress(Exception):
                    ray.get(worker.actor.close_all.remote(), timeout=60)
            reason = (str(exc).strip().splitlines() or ["lost"])[0][:200]
            print(
                f"bench: a learner was lost ({reason}); resuming from its last checkpoint "
                f"(restart {attempt + 1} of {MAX_LEARNER_RESTARTS})",
                file=sys.stderr,
                flush=True,
            )
    raise UsageError(
        f"the learner was lost {MAX_LEARNER_RESTARTS + 1} times; resume with bench run --resume {out}"
    )
