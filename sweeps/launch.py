"""Starting a comparison's or sweep's workers on this machine and waiting for them.

Cores: with W workers on a machine of C cores, worker i runs its runs pinned to its own
C // W cores (each run then uses one learner thread per core beside its engine child: see
`bench.train.loop.learner_threads`); with more workers than cores they share every core.
On 2 cores, 2 workers x 1 core finished a 4-run comparison 1.29x faster than 1 worker x 2
cores (REPRODUCE.md), hence `bench compare`'s default of 2 workers.

GPUs: with G visible GPUs (`CUDA_VISIBLE_DEVICES`, else `nvidia-smi -L`) and W <= G workers,
worker i gets its own G // W of them through CUDA_VISIBLE_DEVICES, so runs never share a GPU
(one GPU per run: start W = G workers; each run sees its GPUs as cuda:0...). With more
workers than GPUs they share all of them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from algorithms.fields import doc
from sweeps.queue import LEASE_S

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
        "Optuna storage of the run queue: a journal file in --out by default (one machine); "
        "postgresql://user@host/db to add workers on other machines",
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
    lease_seconds: float = doc(
        "how long a silent worker keeps its run before others take it over",
        flag="--lease-seconds",
        metavar="S",
        default=LEASE_S,
    )


def core_sets(workers: int) -> list[list[int] | None]:
    """The cores of each of `workers` workers (None: no pinning)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores or workers > len(cores):
        return [None] * workers
    per = len(cores) // workers
    return [cores[i * per : (i + 1) * per] for i in range(workers)]


def gpu_sets(workers: int) -> list[str | None]:
    """The CUDA_VISIBLE_DEVICES value of each worker (None: leave it as it is)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        gpus = [g for g in visible.split(",") if g.strip()]
    else:
        try:
            listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10)
            gpus = [str(i) for i, line in enumerate(listed.stdout.splitlines()) if line.startswith("GPU ")]
        except (OSError, subprocess.TimeoutExpired):
            gpus = []
    if not gpus or workers > len(gpus):
        return [None] * workers
    per = len(gpus) // workers
    return [",".join(gpus[i * per : (i + 1) * per]) for i in range(workers)]


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


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
        env = dict(os.environ) if gpus is None else {**os.environ, "CUDA_VISIBLE_DEVICES": gpus}
        procs.append(subprocess.Popen(args, preexec_fn=_die_with_parent, env=env))
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
