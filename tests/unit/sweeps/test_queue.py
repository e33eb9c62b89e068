"""The run queue in an Optuna storage: each run claimed once, duplicates failed without
running, a dead or silent worker's run taken over, outcomes recorded. Every test runs on a
journal file and on SQLite (an RDB, as PostgreSQL is)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from sweeps.queue import RunQueue, is_dead_here, open_storage, worker_id


@pytest.fixture(params=["journal", "sqlite"])
def storage_url(request, tmp_path):
    return (
        f"journal:{tmp_path / 'study.journal'}"
        if request.param == "journal"
        else f"sqlite:///{tmp_path / 'q.db'}"
    )


def _queue(url, tmp_path, **kw) -> RunQueue:
    return RunQueue(open_storage(url, tmp_path / "unused.journal"), "study", **kw)


def _states(q: RunQueue) -> dict[str, str]:
    return {run: t.state.name for run, t in q.latest().items()}


def test_every_run_is_claimed_once_by_competing_workers(storage_url, tmp_path):
    a, b = _queue(storage_url, tmp_path), _queue(storage_url, tmp_path)
    a.ensure(["r1", "r2", "r3"])
    b.ensure(["r1", "r2", "r3"])  # a second worker starting the same comparison adds nothing
    claims = []
    for q in (a, b, a, b, a):
        c = q.claim()
        if c is not None:
            claims.append(c.run)
    assert sorted(claims) == ["r1", "r2", "r3"]
    assert set(_states(a).values()) == {"RUNNING"}


def test_a_run_enqueued_twice_is_run_once(storage_url, tmp_path):
    q = _queue(storage_url, tmp_path)
    q.study.enqueue_trial({}, user_attrs={"run": "r1"})
    q.study.enqueue_trial({}, user_attrs={"run": "r1"})  # e.g. two workers filled an empty study at once
    first = q.claim()
    assert first.run == "r1"
    assert q.claim() is None  # the second trial of r1 is a duplicate: failed without running
    dup = [t for t in q.study.get_trials(deepcopy=False) if t.user_attrs.get("duplicate")]
    assert len(dup) == 1 and dup[0].state.name == "FAIL"
    q.finish(first, 0.5, {"state": "finished"})
    assert _states(q) == {"r1": "COMPLETE"}
    q.ensure(["r1"])  # a finished run is never enqueued again
    assert q.claim() is None and q.pending() == 0


def test_a_silent_worker_s_run_is_taken_over_after_its_lease(storage_url, tmp_path):
    # a 3 s lease: long enough that a loaded machine still claims inside it (0.5 s was not)
    dead = _queue(storage_url, tmp_path, lease_s=3.0)
    dead.ensure(["r1"])
    dead.worker = "elsewhere:boot:1:1"  # a worker on another machine: only its lease can tell
    claim = dead.claim()
    assert claim.run == "r1"
    other = _queue(storage_url, tmp_path, lease_s=3.0)
    assert other.claim() is None  # the lease is still running
    time.sleep(3.1)
    taken = other.claim()
    assert taken is not None and taken.run == "r1" and taken.number > claim.number
    trials = other.study.get_trials(deepcopy=False)
    assert trials[claim.number].state.name == "FAIL"
    assert trials[claim.number].user_attrs["fail_reason"].startswith("lease expired")
    assert dead.finish(claim, 1.0, {}) is False  # the late worker learns its run was taken over
    assert _states(other) == {"r1": "RUNNING"}  # the taker's trial is the run's trial now


def test_a_dead_worker_of_this_host_is_taken_over_at_once(storage_url, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "from sweeps.queue import worker_id; print(worker_id())"],
        capture_output=True,
        text=True,
        check=True,
    )
    gone = proc.stdout.strip()
    assert is_dead_here(gone) and not is_dead_here(worker_id())
    q = _queue(storage_url, tmp_path)  # a long lease: only the dead process gives the run away
    q.ensure(["r1"])
    q.worker = gone
    first = q.claim()
    q.worker = worker_id()
    again = q.claim()
    assert again is not None and again.run == "r1" and again.number > first.number


def test_failures_are_kept_and_retried_only_when_asked(storage_url, tmp_path):
    q = _queue(storage_url, tmp_path)
    q.ensure(["r1", "r2"])
    c1, c2 = q.claim(), q.claim()
    q.fail(c1, "bench run exited with 3: boom")
    q.finish(c2, float("nan"), {"state": "stopped"})
    assert _states(q) == {"r1": "FAIL", "r2": "COMPLETE"}
    assert q.latest()["r1"].user_attrs["fail_reason"] == "bench run exited with 3: boom"
    q.ensure(["r1", "r2"])
    assert q.claim() is None
    q.ensure(["r1", "r2"], retry_failed=True)
    assert q.claim().run == "r1" and q.claim() is None


def test_an_unreachable_storage_is_one_line(tmp_path):
    from sweeps.queue import QueueError

    with pytest.raises(QueueError, match=r"--storage postgresql://u:\*\*\*@127.0.0.1:1/x: cannot be used"):
        open_storage("postgresql://u:secret@127.0.0.1:1/x", tmp_path / "j")


def test_a_trial_claimed_a_moment_ago_is_not_taken_over_before_its_first_lease(storage_url, tmp_path):
    from optuna.trial import TrialState

    a, b = _queue(storage_url, tmp_path), _queue(storage_url, tmp_path)
    a.ensure(["r1", "r2"])
    waiting = a.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))[0]
    # worker A has just set the trial RUNNING and not yet written its lease: worker B must wait
    a.storage.set_trial_state_values(waiting._trial_id, TrialState.RUNNING)
    taken = b.claim()
    assert taken is not None and taken.run == "r2"
    assert b.claim() is None and _states(a) == {"r1": "RUNNING", "r2": "RUNNING"}
    assert not [t for t in a.study.get_trials(deepcopy=False) if t.state.name == "FAIL"]
