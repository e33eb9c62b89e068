"""`bench run` places its own processes on one node, from the run's config: `learner_ranks`
learner processes (a torch.distributed launch of `bench run` itself, one GPU each on a GPU
host) and `rollout_servers` inference servers that the learners reach through the http engine:
CPU double servers (`bench.engines.double_server`, the gloo weight wire) where no GPU is
visible, `vllm serve` on `rollout_tp` GPUs each on a GPU host (`weight_transfer=nccl`: vLLM's
own NCCL trainer engine, `bench.engines.nccl_wire`). GPUs are taken in order: the learners'
first, then each server's.

The process that the user started only places: it checks the layout against the visible GPUs
(one line, exit 2, before any model loads), starts the servers, launches the learner ranks with
`--set rollout_urls=...` and their own GPUs (`CUDA_VISIBLE_DEVICES`), waits for them, and stops
the servers however the learners ended. `--resume` places the same way from the run's
config.json (new servers, new URLs: where a run's processes live is not what the run is).
The GPU half (vLLM servers, NCCL) has not run on a GPU yet.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from bench.launcher import is_launched
from results.rundir import ATTEMPT_PID_VARIABLE, die_with_parent


@dataclass(frozen=True)
class Layout:
    """Where the placed processes go."""

    learner_gpus: str | None  # CUDA_VISIBLE_DEVICES of the learner launch (None: no GPU visible)
    server_gpus: list[str | None]  # per server: its GPUs (vllm serve), or None (a CPU double server)


def places_processes(config: Any) -> bool:
    """Whether `bench run` with `config` starts processes of its own: more than one learner rank
    or inference servers, and not already inside a launcher (a launched rank trains)."""
    return not is_launched() and (config.learner_ranks > 1 or config.rollout_servers > 0)


def plan_layout(config: Any, gpus: list[str]) -> Layout:
    """The layout of `config` on the visible `gpus`; a UsageError when it does not fit."""
    ranks, servers, tp = config.learner_ranks, config.rollout_servers, config.rollout_tp
    if not gpus:
        if servers and tp != 1:
            raise UsageError(
                f"rollout_tp={tp}: tensor parallelism needs GPUs and none is visible (a CPU double server is "
                "one process); set rollout_tp=1"
            )
        return Layout(None, [None] * servers)
    if servers and config.weight_transfer != "nccl":
        raise UsageError(
            f"rollout_servers={servers} on GPUs starts vllm serve, which takes weights over NCCL: add "
            "--set weight_transfer=nccl"
        )
    need = ranks + servers * tp
    if need > len(gpus):
        raise UsageError(
            f"learner_ranks={ranks} + rollout_servers={servers} x rollout_tp={tp} need {need} GPUs and "
            f"{len(gpus)} are visible ({','.join(gpus)}); lower them"
        )
    server_gpus: list[str | None] = [
        ",".join(gpus[ranks + i * tp : ranks + (i + 1) * tp]) for i in range(servers)
    ]
    return Layout(",".join(gpus[:ranks]), server_gpus)


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
    """Start one server per entry of `layout.server_gpus` (a CPU double server, or `vllm serve`
    on its GPUs) and return them once each answers (stopped again if one fails to start)."""
    from bench.engines.server_procs import start_double, start_vllm

    model, started = server_model(config), []
    try:
        for gpus in layout.server_gpus:
            if gpus is None:
                started.append(start_double(model, slots=config.engine_slots))
            else:
                started.append(start_vllm(model, gpus, config.rollout_tp))
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


def launch(argv: list[str], config: Any, out: Path | None, gpus: list[str]) -> int:
    """Place the run of `config` (module docstring) on the visible `gpus`: servers, then
    `learner_ranks` ranks of `bench` with `argv` (the user's command line, `run ...`) plus the
    servers' URLs and, for a new run, `--out`; returns the learners' exit code."""
    from bench.engines.weight_wire import free_port

    layout = plan_layout(config, gpus)
    servers = start_servers(config, layout)
    try:
        child_argv = [*argv, *(["--out", str(out)] if out is not None else [])]
        if servers:
            child_argv += ["--set", "rollout_urls=" + ",".join(s.url for s in servers)]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--master-port", str(free_port())]
        cmd += ["--nproc-per-node", str(config.learner_ranks), "-m", "bench.cli", *child_argv]
        env = {**os.environ, ATTEMPT_PID_VARIABLE: str(os.getpid())}  # the ranks' outcome is this attempt's
        if layout.learner_gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = layout.learner_gpus
        print(
            f"bench: placing {config.learner_ranks} learner rank(s) and {len(servers)} server(s)"
            + "".join(f"; server {s.url}" for s in servers),
            file=sys.stderr,
            flush=True,
        )
        # SIGTERM to torchrun if this process is killed outright: it stops its ranks, which checkpoint
        learners = subprocess.Popen(
            cmd, env=env, preexec_fn=functools.partial(die_with_parent, signal.SIGTERM)
        )
        try:
            return learners.wait()
        except BaseException:  # interrupted or terminated: the ranks checkpoint and stop first
            learners.terminate()
            learners.wait()
            raise
    finally:
        for server in servers:
            server.stop()
