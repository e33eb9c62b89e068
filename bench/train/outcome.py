"""How a run ends, recorded by the run itself (the run-dir contract, `results.rundir`):
`recorded_outcome` marks the run `running`, turns SIGTERM into `RunTerminated` while it trains
(so the loop's cleanup runs: the engine child, trackers), and writes the outcome of any
exception that ends it; the loop writes the finished summary itself. Readers never need the
process's output to know how a run ended.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.errors import RunStopped, RunTerminated
from results.rundir import RunDir, RunOutcome, attempt_pid


def ending(exc: BaseException) -> tuple[RunOutcome, str]:
    """(outcome, detail) of a run that `exc` ended."""
    if isinstance(exc, RunStopped):
        return exc.outcome, str(exc)
    if isinstance(exc, RunTerminated):
        return RunOutcome.KILLED, "terminated (SIGTERM)"
    if isinstance(exc, KeyboardInterrupt):
        return RunOutcome.KILLED, "interrupted (Ctrl-C)"
    first_line = (str(exc).strip().splitlines() or [""])[0][:500]
    return RunOutcome.FAILED, f"{type(exc).__name__}: {first_line}".rstrip(": ")


def ended_summary(exc: BaseException) -> dict[str, Any]:
    """The summary.json of a run that `exc` ended before its budget was spent."""
    outcome, detail = ending(exc)
    return {
        "outcome": outcome,
        "stopped_by": None,
        "detail": detail,
        "pid": attempt_pid(),
        "ended": time.time(),
    }


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While the block runs, SIGTERM raises RunTerminated in the main thread (elsewhere, where
    Python cannot install handlers, the default stays); the previous handler is restored after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum: int, frame: Any) -> None:
        raise RunTerminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def recorded_outcome(run: RunDir, main: bool) -> Iterator[None]:
    """Mark the run running (main process), write how an exception ended it, re-raise."""
    if main:
        run.mark_running()
    try:
        with terminate_raises():
            yield
    except BaseException as exc:
        if main:
            try:
                run.write_summary(ended_summary(exc))
            except OSError:  # e.g. the disk that ended the run is full: its own error says so
                pass  # summary.json still says `running`; with the run's lock gone it reads as killed
        raise
