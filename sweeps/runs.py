"""One run of a comparison or a sweep trial, as a worker plays it: train it (or resume it) to
its budget as a `bench run` child, then evaluate its selected checkpoint as a `bench eval` child.

How the run ended is read from its run directory, as the run recorded it (summary.json's typed
outcome, `results.rundir.RunDir.read_outcome`), and from the child's exit code for a
directory another process holds (`BUSY_EXIT_CODE`); never from the child's output. The last
line of its log is quoted only in the detail of a failure the run could not record (e.g. a
config refused before the run started).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results.experiments import RunState, select_checkpoint
from results.files import read_json, write_json_atomic
from results.rundir import BUSY_EXIT_CODE, RunDir, RunOutcome
from sweeps.processes import last_line, run_bench, start_bench

POLL_S = 1.0
ONE_LINE_EXIT_CODE = 2
"""`bench`'s exit code after a one-line error: bad input, or a fault of the machine (a full disk),
which may have kept the run from recording its end (it then reads as killed)."""
STOPPED_ITSELF = (RunOutcome.NON_FINITE, RunOutcome.STARVED)
"""Outcomes of a run that ended itself: a result (evaluated if it has a checkpoint), not a crash."""


@dataclass(frozen=True)
class RunResult:
    """How one attempt at a run ended, for the worker."""

    state: RunState
    detail: str


def train_or_resume(
    run_dir: Path,
    layers: list[dict[str, Any]],
    config_file: Path,
    log: Path,
    cores: list[int] | None,
    watch: Callable[[], None] | None = None,
) -> RunResult:
    """Train the run in `run_dir` to its budget as a `bench run` child: from `layers` (written
    to `config_file` for the child to validate and merge) when it has no config.json yet, else
    with `--resume` (it continues from its newest intact checkpoint). A run that finished
    before is not started again. `watch` is called about every POLL_S seconds while the child
    trains (a sweep reports the in-training curve there); whatever it raises kills the child
    and propagates. The child's output is appended to `log`."""
    end = RunDir(run_dir).read_outcome()
    if end is not None and end.outcome is RunOutcome.FINISHED:
        return RunResult(RunState.FINISHED, "already trained")
    if (run_dir / "config.json").exists():
        args = ["run", "--resume", str(run_dir)]
    else:
        config_file.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config_file, layers)
        args = ["run", "--config", str(config_file), "--out", str(run_dir)]
    proc = start_bench([*args, "--no-progress"], log, cores)
    try:
        if watch is None:
            proc.wait()
        else:
            while proc.poll() is None:
                watch()
                time.sleep(POLL_S)
            watch()  # what the run wrote after the last look
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return run_result(proc.returncode, proc.pid, run_dir, log)


def run_result(code: int, pid: int, run_dir: Path, log: Path) -> RunResult:
    """How the `bench run` child `pid` ended (module docstring): finished (detail: the budget
    kind that stopped it), stopped (it ended itself), busy (another process holds the run
    directory: a duplicate start) or failed."""
    if code == BUSY_EXIT_CODE:
        return RunResult(RunState.BUSY, f"{run_dir} is in use by another process")
    end = RunDir(run_dir).read_outcome()
    if end is None or end.pid != pid:  # the attempt ended before it could record anything
        return RunResult(RunState.FAILED, f"bench run exited with {code}: {last_line(log)}")
    if end.outcome is RunOutcome.FINISHED:  # trained to its budget, whatever happened after
        return RunResult(RunState.FINISHED, str(end.stopped_by))
    if end.outcome in STOPPED_ITSELF:
        return RunResult(RunState.STOPPED, f"{end.outcome}: {end.detail}")
    if end.outcome is RunOutcome.KILLED and code == ONE_LINE_EXIT_CODE:  # it could not record its end
        return RunResult(RunState.FAILED, f"bench run exited with {code}: {last_line(log)}")
    return RunResult(RunState.FAILED, f"bench run exited with {code}: {end.outcome}: {end.detail}")


def evaluate_checkpoint(run_dir: Path, plan: Any, log: Path, cores: list[int] | None) -> tuple[bool, str]:
    """Evaluate `run_dir`'s checkpoint chosen by `plan.select` on `plan.benchmarks` with `bench
    eval` into `run_dir/evals/final/` (resumable, like any `bench eval`): (ok, detail). `plan`
    is a `sweeps.comparison.EvalPlan`."""
    checkpoint, why = select_checkpoint(run_dir, plan.select)
    if checkpoint is None:
        return False, why
    args = ["eval", "--model", str(checkpoint), "--bench", ",".join(plan.benchmarks), "--k", str(plan.k)]
    args += ["--seed", str(plan.seed), "--out", str(run_dir / "evals" / "final"), "--no-progress"]
    if plan.limit is not None:
        args += ["--limit", str(plan.limit)]
    code = run_bench(args, log, cores)
    if code != 0:
        return False, f"bench eval exited with {code}: {last_line(log)}"
    write_json_atomic(
        run_dir / "evals" / "final" / "selected.json", {"checkpoint": str(checkpoint), "rule": why}
    )
    return True, why


def add_to_summary(run_dir: Path, key: str, value: Any) -> None:
    """Add one key to the run's summary.json (e.g. the sweep trial it belongs to)."""
    path = run_dir / "summary.json"
    if path.exists():
        write_json_atomic(path, {**read_json(path), key: value})
