"""Starting a comparison's workers on this machine and waiting for them.

Cores: with W workers on a machine of C cores, worker i runs its runs pinned to its own
C // W cores (each run then uses one learner thread per core beside its engine child: see
`bench.train.loop.learner_threads`); with more workers than cores they share every core.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path


def core_sets(workers: int) -> list[list[int] | None]:
    """The cores of each of `workers` workers (None: no pinning)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not cores or workers > len(cores):
        return [None] * workers
    per = len(cores) // workers
    return [cores[i * per : (i + 1) * per] for i in range(workers)]


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_workers(out: Path, workers: int) -> list[int]:
    """Start `workers` worker processes on the comparison in `out`, wait for all; their exit
    codes. Ctrl-C stops them (their runs keep their checkpoints; the same command resumes)."""
    procs = []
    for cores in core_sets(workers):
        args = [sys.executable, "-m", "sweeps.worker", str(out)]
        if cores:
            args += ["--cores", ",".join(map(str, cores))]
        procs.append(subprocess.Popen(args, preexec_fn=_die_with_parent))
    try:
        return [p.wait() for p in procs]
    except KeyboardInterrupt:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
        raise
