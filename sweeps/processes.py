"""`bench` child processes of comparison and sweep workers: each run or evaluation is its own
process (a crash cannot take the worker down), killed with its worker (parent-death signal,
so a run whose worker died is never trained twice at once) and pinned to the worker's cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from results.rundir import die_with_parent
from sweeps.launcher import without_launcher_variables


def _child_setup(cores: list[int] | None):
    """preexec_fn of run and eval processes: die with the worker, run on its cores."""

    def setup() -> None:
        die_with_parent(signal.SIGKILL)
        if cores:
            os.sched_setaffinity(0, cores)

    return setup


def start_bench(args: list[str], log: Path, cores: list[int] | None) -> subprocess.Popen:
    """Start `bench ARGS` with its output appended to `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**without_launcher_variables(os.environ), "PYTHONUNBUFFERED": "1"}
    with open(log, "a") as f:
        f.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} bench {' '.join(args)}\n")
        f.flush()
        return subprocess.Popen(
            [sys.executable, "-m", "bench.cli", *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_child_setup(cores),
        )


def run_bench(args: list[str], log: Path, cores: list[int] | None) -> int:
    """Run `bench ARGS` to its end (output appended to `log`); its exit code."""
    return start_bench(args, log, cores).wait()


def last_line(log: Path) -> str:
    """The last meaningful line of a log (an error message, a traceback's last line): quoted in
    the detail of a failure, never read to tell how a run ended (`sweeps.runs`)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else "no output"
