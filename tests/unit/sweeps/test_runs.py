"""How a worker reads a `bench run` child's end: from the outcome the run recorded and the
busy exit code, never from its output (the log's last line only in a failure's detail)."""

from __future__ import annotations

import json

import pytest

from results.experiments import RunState
from results.rundir import BUSY_EXIT_CODE, RunDir
from sweeps.runs import RunResult, run_result

PID = 4242


def _child(tmp_path, summary: dict | None, log_line: str = "bench: run stopped: whatever the log says"):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps(summary))
    log = tmp_path / "run.log"
    log.write_text(f"=== start\n{log_line}\n")
    return run_dir, log


@pytest.mark.parametrize(
    "code, summary, expected",
    [
        (
            0,
            {"outcome": "finished", "stopped_by": "trajectories", "pid": PID},
            (RunState.FINISHED, "trajectories"),
        ),
        (
            1,
            {"outcome": "non-finite", "detail": "3 losses", "pid": PID},
            (RunState.STOPPED, "non-finite: 3 losses"),
        ),
        (
            1,
            {"outcome": "starved", "detail": "200 groups", "pid": PID},
            (RunState.STOPPED, "starved: 200 groups"),
        ),
        (
            143,
            {"outcome": "killed", "detail": "terminated (SIGTERM)", "pid": PID},
            (RunState.FAILED, "bench run exited with 143: killed: terminated (SIGTERM)"),
        ),
        (
            1,
            {"outcome": "failed", "detail": "RuntimeError: x", "pid": PID},
            (RunState.FAILED, "bench run exited with 1: failed: RuntimeError: x"),
        ),
    ],
)
def test_the_run_s_own_outcome_decides(code, summary, expected, tmp_path):
    run_dir, log = _child(tmp_path, summary)
    assert run_result(code, PID, run_dir, log) == RunResult(*expected)


def test_a_child_killed_without_a_word_failed(tmp_path):
    run_dir, log = _child(tmp_path, {"outcome": "running", "pid": PID}, "step 3")
    result = run_result(-9, PID, run_dir, log)
    assert result.state is RunState.FAILED and "killed: its process ended without recording" in result.detail


def test_a_child_that_could_not_record_its_end_is_quoted(tmp_path):
    """A disk full enough to fail the run keeps it from writing its end too: it exits with its
    one-line error (code 2) and reads as killed; the detail is that line, not "killed"."""
    said = "bench: error: /runs/x/summary.json: no space left on device; free some space there"
    run_dir, log = _child(tmp_path, {"outcome": "running", "pid": PID}, said)
    assert run_result(2, PID, run_dir, log) == RunResult(RunState.FAILED, f"bench run exited with 2: {said}")


def test_an_outcome_another_attempt_wrote_is_not_this_child_s(tmp_path):
    """A retried run whose child failed before training (e.g. a refused config) finds the
    previous attempt's outcome: the child's pid tells them apart; its log line is quoted."""
    run_dir, log = _child(tmp_path, {"outcome": "non-finite", "pid": PID - 1}, "bench: error: no such model")
    assert run_result(2, PID, run_dir, log) == RunResult(
        RunState.FAILED, "bench run exited with 2: bench: error: no such model"
    )
    run_dir.joinpath("summary.json").unlink()  # a first attempt that never started training
    assert run_result(2, PID, run_dir, log).state is RunState.FAILED


def test_a_run_dir_held_by_another_process_is_busy_by_its_exit_code(tmp_path):
    run_dir, log = _child(tmp_path, {"outcome": "running", "pid": PID + 1}, "anything at all")
    RunDir(run_dir).lock()
    try:
        assert run_result(BUSY_EXIT_CODE, PID, run_dir, log).state is RunState.BUSY
    finally:
        RunDir(run_dir).unlock()
