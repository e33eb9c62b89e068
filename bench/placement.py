"""`bench run` places its own processes on one node, from the run's config: `learner_ranks`
learner processes (a torch.distributed launch of `bench run` itself, one GPU each on a GPU
host) and `rollout_servers` inference servers that the learners reach through the http engine
(the CPU double server, `bench.engines.double_server`; vLLM servers on GPUs wait for the
learner side of vLLM's NCCL weight transfer, which is not built: refused there in one line).

The process that the user started only places: it checks the layout against the visible GPUs
(one line, exit 2, before any model loads), starts the servers, launches the learner ranks with
`--set rollout_urls=...` and their own GPUs (`CUDA_VISIBLE_DEVICES`), waits for them, and stops
the servers however the learners ended. `--resume` places the same way from the run's
config.json (new servers, new URLs: where a run's processes live is not what the run is).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.launcher import is_launched


@dataclass(frozen=True)
class Layout:
    """Where the placed processes go."""

    learner_gpus: str | None  # CUDA_VISIBLE_DEVICES of the learner launch (None: no GPU visible)
    servers: int  # CPU double servers to start


def places_processes(config: Any) -> bool:
    """Whether `bench run` with `config` starts processes of its own: more than one learner rank
    or inference servers, and not already inside a launcher (a launched rank trains)."""
    return not is_launched() and (config.learner_ranks > 1 or config.rollout_servers > 0)


def plan_layout(config: Any, gpus: list[str]) -> Layout:
    """The layout of `config` on the visible `gpus`; a UsageError when it does not fit."""
    ranks, servers = config.learner_ranks, config.rollout_servers
    if not gpus:
        return Layout(None, servers)
    if servers:
        raise UsageError(
            f"rollout_servers={servers}: vLLM servers on GPUs need the learner side of vLLM's NCCL weight "
            "transfer, which is not built yet (docs/backends.md); on GPUs use engine=vllm beside each learner rank"
        )
    if ranks > len(gpus):
        raise UsageError(
            f"learner_ranks={ranks}: one GPU per rank and {len(gpus)} are visible ({','.join(gpus)}); lower it"
        )
    return Layout(",".join(gpus[:ranks]), 0)


def server_model(config: Any) -> str:
    """What a server loads (its weights are replaced by the learner's first push; the
    architecture and tokenizer are what count): the task's tiny base, an offline model's
    directory, or the model spec itself."""
    from bench.models.offline import OFFLINE_MODELS

    if config.model == "tiny":
        from bench.models.cache import ensure_base_checkpoint

        return str(ensure_base_checkpoint(config.task, config.task_args))
    if config.model in OFFLINE_MODELS:
        from bench.models.offline import ensure_offline_model

        return str(ensure_offline_model(config.model))
    return config.model


def start_servers(config: Any, layout: Layout) -> list[Any]:
    """Start `layout.servers` CPU double servers and return them once each answers (stopped
    again if one fails to start)."""
    from bench.engines.server_procs import start_double

    model, started = server_model(config), []
    try:
        for _ in range(layout.servers):
            started.append(start_double(model, slots=config.engine_slots))
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def launch(argv: list[str], config: Any, out: Path | None) -> int:
    """Place the run of `config` (module docstring): servers, then `learner_ranks` ranks of
    `bench` with `argv` (the user's command line, `run ...`) plus the servers' URLs and, for a
    new run, `--out`; returns the learners' exit code."""
    from bench.engines.weight_wire import free_port
    from sweeps.launch import visible_gpus

    layout = plan_layout(config, visible_gpus())
    servers = start_servers(config, layout)
    try:
        child_argv = [*argv, *(["--out", str(out)] if out is not None else [])]
        if servers:
            child_argv += ["--set", "rollout_urls=" + ",".join(s.url for s in servers)]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--master-port", str(free_port())]
        cmd += ["--nproc-per-node", str(config.learner_ranks), "-m", "bench.cli", *child_argv]
        env = dict(os.environ)
        if layout.learner_gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = layout.learner_gpus
        print(
            f"bench: placing {config.learner_ranks} learner rank(s) and {len(servers)} server(s)"
            + "".join(f"; server {s.url}" for s in servers),
            file=sys.stderr,
            flush=True,
        )
        learners = subprocess.Popen(cmd, env=env)
        try:
            return learners.wait()
        except BaseException:  # interrupted or terminated: the ranks checkpoint and stop first
            learners.terminate()
            learners.wait()
            raise
    finally:
        for server in servers:
            server.stop()
