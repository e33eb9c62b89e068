"""Starting a comparison's or sweep's workers on this machine and waiting for them.

Cores: with W workers on a machine of C cores, worker i runs its runs pinned to its own
C // W cores (each run then uses one learner thread per core beside its engine child: see
`bench.train.loop.learner_threads`); with more workers than cores they share every core.
On 2 cores, 2 workers x 1 core finished a 4-run comparison 1.29x faster than 1 worker x 2
cores (REPRODUCE.md), hence `bench compare`'s default of 2 workers.

GPUs: with G visible GPUs (`CUDA_VISIBLE_DEVICES`, else `nvidia-smi -L`), worker i gets the
GPUs its runs ask for, its own, through CUDA_VISIBLE_DEVICES (each run sees them as cuda:0...):
one per run today (a run is one learner process). More workers than the GPUs can hold is
refused before anything starts, instead of stacking runs on one GPU. Without GPUs nothing is set.

Workers and their runs never inherit a distributed launcher's variables (`sweeps.launcher`).
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from algorithms.fields import doc
from results.rundir import die_with_parent
from sweeps.errors import ExperimentError
from sweeps.launcher import without_launcher_variables

DEFAULT_WORKERS = 2
"""Runs side by side on one machine; each gets its share of the cores (module docstring)."""


@dataclass(frozen=True)
class LaunchOptions:
    """Where and how a comparison or sweep runs (not part of its spec: the same experiment may
    run with any of these). The fields with a flag are `bench compare`'s and `bench sweep`'s
    options (`bench.commands.add_field_options`)."""

    workers: int = doc(
        "worker processes on this machine, each on its share of the cores",
        flag="--workers",
        metavar="W",
        default=DEFAULT_WORKERS,
    )
    storage: str = doc(
        "Optuna storage of the run queue and the studies: a journal file in --out by default; an RDB URL "
        "(postgresql://user@host/db) to keep them in a database (for several machines use --cluster ray)",
        flag="--storage",
        metavar="URL",
        default="",
    )
    out: str | None = doc(
        "the experiment's directory (default: comparisons/ or sweeps/<task>-<hash of the settings>, so "
        "the same command resumes it)",
        flag="--out",
        metavar="DIR",
        default=None,
    )
    cluster: str = doc(
        "where the runs execute: local (--workers processes here) or ray (each run a Ray task on a node "
        "with its CPUs and GPUs; --out on a filesystem every node reaches); default: ray where RAY_ADDRESS is "
        "set (as under `ray job submit`), else local",
        flag="--cluster",
        choices=("local", "ray"),
        default="",
    )
    ray_address: str = doc(
        "the Ray cluster's head, HOST:PORT as `ray start --head` prints it (default: RAY_ADDRESS, else the "
        "cluster started on this machine)",
        flag="--ray-address",
        metavar="ADDR",
        default="",
    )
    cpus_per_run: float = doc(
        "CPUs each run asks of a Ray node (its GPUs come from its config: learner_ranks + rollout_servers x "
        "rollout_tp)",
        flag="--cpus-per-run",
        metavar="N",
        default=1.0,
    )


def core_sets(workers: int) -> list[list[int] | None]:
    """The cores of each of `workers` workers (None: no pinning)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores or workers > len(cores):
        return [None] * workers
    per = len(cores) // workers
    return [cores[i * per : (i + 1) * per] for i in range(workers)]


GPUS_PER_RUN = 1
"""GPUs one run asks for: a run is one learner process on one GPU (with the engine beside it)."""


def visible_gpus() -> list[str]:
    """The GPUs this process may use: CUDA_VISIBLE_DEVICES, else those `nvidia-smi -L` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [g.strip() for g in visible.split(",") if g.strip()]
    return listed_gpus()


def listed_gpus() -> list[str]:
    """The indices of the GPUs the NVIDIA driver lists (`nvidia-smi -L`); none without a driver."""
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU ")]


def gpu_sets(workers: int, gpus_per_run: int = GPUS_PER_RUN) -> list[str | None]:
    """The CUDA_VISIBLE_DEVICES value of each worker: its own `gpus_per_run` GPUs (None for every
    worker on a machine without GPUs). An ExperimentError when they do not fit."""
    gpus = visible_gpus()
    if not gpus:
        return [None] * workers
    if workers * gpus_per_run > len(gpus):
        raise ExperimentError(
            f"--workers {workers}: each run needs {gpus_per_run} GPU(s) of its own and {len(gpus)} are visible "
            f"({','.join(gpus)}), room for {len(gpus) // gpus_per_run} worker(s); lower --workers"
        )
    return [",".join(gpus[i * gpus_per_run : (i + 1) * gpus_per_run]) for i in range(workers)]


POLL_S = 2.0
"""how often the live view (`sweeps.progress`) rereads the experiment's directory"""


def run_workers(out: Path, workers: int, view: bool = True) -> list[int]:
    """Start `workers` worker processes (`python -m sweeps.worker OUT`, for a comparison or a
    sweep directory) and wait for all, showing the live view of their runs (`view`); their exit
    codes. Ctrl-C stops them (their runs keep their checkpoints; the same command resumes)."""
    from sweeps.progress import LiveView

    live = LiveView(out) if view else None
    procs = []
    for cores, gpus in zip(core_sets(workers), gpu_sets(workers)):
        args = [sys.executable, "-m", "sweeps.worker", str(out)]
        if cores:
            args += ["--cores", ",".join(map(str, cores))]
        env = without_launcher_variables(os.environ)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        procs.append(
            subprocess.Popen(args, preexec_fn=functools.partial(die_with_parent, signal.SIGTERM), env=env)
        )
    try:
        while any(p.poll() is None for p in procs):
            if live is not None:
                live.poll()
            time.sleep(POLL_S)
        if live is not None:
            live.poll()
        return [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
        raise
