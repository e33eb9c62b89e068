"""`bench run --cluster ray`: one run's processes placed on a Ray cluster, the same parts as on
one node (`bench.placement`) but on whichever nodes have room.

* **One placement group per run**: bundle 0 is the learner (`learner_ranks` GPUs, 1 CPU), bundle
  i the i-th rollout server (`rollout_tp` GPUs, 1 CPU), strategy PACK: Ray puts them on as few
  nodes as it can and spreads them when one node cannot hold them all (no GPUs are asked on a
  cluster without any). Placing waits at most `PLACE_TIMEOUT_S`.
* **Servers**: one Ray actor per server bundle starts it on its node listening on every
  interface (a CPU double server, or `vllm serve` where the node has real GPUs) and answers its
  URL with the node's address. Weights reach them as on one node (the http engine; the trainer
  tells a remote server an address of its own host for the transfer store).
* **Learner**: a Ray actor in bundle 0 runs `torchrun --standalone --nproc-per-node R -m
  bench.cli run ...` with the servers' URLs; this process waits for it. When the actor is lost
  (its node died, or it was killed), a new one starts in the same bundle (Ray places a lost
  node's bundle again where resources allow) with `bench run --resume`, up to
  `MAX_LEARNER_RESTARTS` times; the run resumes from its last intact checkpoint and its
  events.jsonl records the resume. Servers stay up across learner restarts.

Not built: learner ranks over several nodes (a learner is one node's ranks). Logical GPUs (a
simulated cluster) are bookkeeping only: without an NVIDIA GPU the actors run on CPU.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from results.rundir import ATTEMPT_PID_VARIABLE

MAX_LEARNER_RESTARTS = 3
"""New learner actors after a lost one, before the run is given up."""
PLACE_TIMEOUT_S = 600.0
"""How long the run waits for the cluster to hold its placement group."""
NAMESPACE = "bench"
"""The Ray namespace of the learner actors (`learner_actor_name`): `sweeps.ray_cluster`'s."""
BUSY_WAIT_S = 120.0
"""How long a new learner waits for a lost one's ranks to release the run directory."""


def learner_actor_name(out: Path) -> str:
    """The Ray name of the learner actor of the run in `out` (namespace `NAMESPACE`): how a
    user or a test finds it (`ray.get_actor(name, namespace="bench")`)."""
    return "bench-learner-" + hashlib.sha1(str(Path(out).resolve()).encode()).hexdigest()[:12]


def _real_gpus() -> bool:
    import torch

    return torch.cuda.is_available()


def _die_with_parent() -> None:
    try:  # SIGTERM: torchrun stops its ranks, which checkpoint and release the run directory
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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

    def train(self, cmd: list[str], out: str) -> int:
        """Run `cmd` (torchrun of `bench run` for the run in `out`) to its end; its exit code.
        A run directory still held by a lost attempt's ranks (they checkpoint on SIGTERM, then
        let go) is waited for, `BUSY_WAIT_S` at most."""
        from results.rundir import RunDir

        env = {**os.environ, ATTEMPT_PID_VARIABLE: str(os.getpid())}
        if not _real_gpus():
            env.pop("CUDA_VISIBLE_DEVICES", None)
        run, deadline = RunDir(out), time.monotonic() + BUSY_WAIT_S
        while (run.path / "config.json").exists() and run.is_locked() and time.monotonic() < deadline:
            time.sleep(1.0)
        return subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent).wait()


def _bundle(cpus: float, gpus: int) -> dict[str, float]:
    return {"CPU": cpus, **({"GPU": float(gpus)} if gpus else {})}


def place_on_ray(ray: Any, argv: list[str], config: Any, out: Path, fresh: bool, has_gpus: bool) -> int:
    """Place the run of `config` in `out` on the connected cluster (module docstring): `argv`
    is the user's `bench run` command line (without `--cluster`), `fresh` whether it starts a
    new run (else it resumes `out`); the learner's exit code."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    from bench.placement import server_model

    ranks, servers, tp = config.learner_ranks, config.rollout_servers, config.rollout_tp
    learner_gpus, server_gpus = (ranks, tp) if has_gpus else (0, 0)
    group = placement_group([_bundle(1, learner_gpus)] + [_bundle(1, server_gpus)] * servers, strategy="PACK")
    ready, _ = ray.wait([group.ready()], timeout=PLACE_TIMEOUT_S)
    if not ready:
        remove_placement_group(group)
        raise UsageError(
            f"the Ray cluster did not hold this run's placement ({ranks} learner rank(s), {servers} server(s) x "
            f"{tp} GPU) within {PLACE_TIMEOUT_S:.0f} s"
        )

    def in_bundle(i: int, gpus: int) -> dict[str, Any]:
        strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i)
        return {"scheduling_strategy": strategy, "num_cpus": 1, "num_gpus": gpus}

    actors: list[Any] = []
    try:
        server_cls = ray.remote(ServerActor)
        for i in range(servers):
            actors.append(server_cls.options(**in_bundle(i + 1, server_gpus)).remote())
        started = ray.get([a.start.remote(server_model(config), config.engine_slots, tp) for a in actors])
        urls = ",".join(url for url, _ in started)
        first = [*argv, *(["--out", str(out)] if fresh else []), "--no-progress"]
        return _train(ray, in_bundle(0, learner_gpus), first, out, urls, ranks, [node for _, node in started])
    finally:
        for actor in actors:
            try:
                ray.get(actor.stop.remote(), timeout=60)
            except Exception:  # already gone with its node: nothing left to stop
                pass
        remove_placement_group(group)


def _train(
    ray: Any, options: dict, argv: list[str], out: Path, urls: str, ranks: int, server_nodes: list
) -> int:
    """Run the learner actor, and a resuming one after each loss (module docstring)."""
    learner_cls = ray.remote(LearnerActor)
    for attempt in range(MAX_LEARNER_RESTARTS + 1):
        if attempt and (out / "config.json").exists():
            argv = ["run", "--resume", str(out), "--no-progress"]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks)]
        cmd += ["-m", "bench.cli", *argv, *(["--set", f"rollout_urls={urls}"] if urls else [])]
        actor = learner_cls.options(**options, name=learner_actor_name(out), namespace=NAMESPACE).remote()
        try:
            node = ray.get(actor.node.remote())
            where = f"learner ({ranks} rank(s)) on node {node[:8]}" + "".join(
                f"; server {url} on node {n[:8]}" for url, n in zip(urls.split(","), server_nodes) if url
            )
            print(f"bench: placed on ray: {where}", file=sys.stderr, flush=True)
            return ray.get(actor.train.remote(cmd, str(out)))
        except ray.exceptions.RayActorError as exc:
            reason = (str(exc).strip().splitlines() or ["lost"])[0][:200]
            print(
                f"bench: the learner was lost ({reason}); resuming from its last checkpoint "
                f"(restart {attempt + 1} of {MAX_LEARNER_RESTARTS})",
                file=sys.stderr,
                flush=True,
            )
    raise UsageError(
        f"the learner was lost {MAX_LEARNER_RESTARTS + 1} times; resume with bench run --resume {out}"
    )
