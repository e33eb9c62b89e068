"""The run queue in an Optuna storage: each run claimed once, duplicates failed without
running, a gone holder's run taken over (another machine's left to its backend), outcomes
recorded. Every test runs on a journal file and on SQLite (an RDB, as PostgreSQL is)."""

from __future__ import annotations

import os
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


def _gone_worker() -> str:
    """The worker id of a process of this host that has ended."""
    proc = subprocess.run(
        [sys.executable, "-c", "from sweeps.queue import worker_id; print(worker_id())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout.strip()


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


def test_another_machine_s_holder_is_left_to_the_backend_that_can_see_it(storage_url, tmp_path):
    elsewhere = "elsewhere:boot:1:1"  # a worker on another machine: this one cannot see its process
    holder = _queue(storage_url, tmp_path)
    holder.ensure(["r1", "r2"])
    holder.worker = elsewhere
    claim = holder.claim()
    local = _queue(storage_url, tmp_path)
    assert not is_dead_here(elsewhere)  # the local check never guesses about another host
    assert local.foreign_holds() == {"elsewhere": ["r1"]}
    time.sleep(0.2)
    assert local.claim().run == "r2" and local.claim() is None  # r1 stays with its holder
    ray_like = _queue(storage_url, tmp_path)
    asked = []
    ray_like.holder_gone = lambda h: asked.append(h) or True  # a backend that saw it gone (Ray asks its node)
    taken = ray_like.claim()
    assert asked == [elsewhere] and taken.run == "r1" and taken.number > claim.number
    trials = ray_like.study.get_trials(deepcopy=False)
    assert trials[claim.number].state.name == "FAIL"
    assert trials[claim.number].user_attrs["fail_reason"] == "holder gone (elsewhere:boot:1:1)"
    assert holder.finish(claim, 1.0, {}) is False  # the late worker learns its run was taken over
    assert _states(local)["r1"] == "RUNNING"  # the taker's trial is the run's trial now


def test_a_holder_of_an_earlier_boot_of_this_host_is_gone(storage_url, tmp_path):
    import socket

    assert is_dead_here(f"{socket.gethostname()}:0ldb00t:{os.getpid()}:1")
    assert is_dead_here(f"{socket.gethostname()}:x")  # not a name this code writes: no such process
    assert not is_dead_here(worker_id())


def test_a_dead_worker_of_this_host_is_taken_over_at_once(storage_url, tmp_path):
    gone = _gone_worker()
    assert is_dead_here(gone) and not is_dead_here(worker_id())
    q = _queue(storage_url, tmp_path)
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


def test_a_trial_claimed_a_moment_ago_is_not_taken_over_before_its_holder_is_written(
    storage_url, tmp_path, monkeypatch
):
    from optuna.trial import TrialState

    import sweeps.queue

    a, b = _queue(storage_url, tmp_path), _queue(storage_url, tmp_path)
    a.ensure(["r1", "r2"])
    waiting = a.study.get_trials(deepcopy=False, states=(TrialState.WAITING,))[0]
    # worker A has just set the trial RUNNING and not yet written its name: worker B must wait
    a.storage.set_trial_state_values(waiting._trial_id, TrialState.RUNNING)
    taken = b.claim()
    assert taken is not None and taken.run == "r2"
    assert b.claim() is None and _states(a) == {"r1": "RUNNING", "r2": "RUNNING"}
    assert not [t for t in a.study.get_trials(deepcopy=False) if t.state.name == "FAIL"]
    # A died before writing its name: after the grace, its claim is stale
    monkeypatch.setattr(sweeps.queue, "UNRECORDED_HOLDER_S", 0.0)
    again = b.claim()
    assert again is not None and again.run == "r1"
    failed = [t for t in a.study.get_trials(deepcopy=False) if t.state.name == "FAIL"]
    assert [t.user_attrs["fail_reason"] for t in failed] == ["holder gone (unrecorded)"]


def test_the_local_backend_refuses_a_queue_held_on_another_machine(storage_url, tmp_path):
    from sweeps.errors import ExperimentError
    from sweeps.worker import refuse_foreign_holds

    holder, local = _queue(storage_url, tmp_path), _queue(storage_url, tmp_path)
    holder.ensure(["r1", "r2"])
    refuse_foreign_holds([local])  # nothing held anywhere: fine
    holder.worker = "elsewhere:boot:1:1"
    holder.claim()
    refuse_foreign_holds([local], only_if_all_pending=True)  # r2 still waits for this machine
    with pytest.raises(ExperimentError, match=r"1 run\(s\) are held by workers of another machine \(r1 on "):
        refuse_foreign_holds([local])
    local.finish(local.claim(), 1.0, {})  # r2 done: only r1 is left, which only `elsewhere` can see
    with pytest.raises(ExperimentError, match="--cluster ray"):
        refuse_foreign_holds([local], only_if_all_pending=True)


def test_a_taken_over_run_is_claimed_before_the_runs_that_never_started(storage_url, tmp_path):
    q = _queue(storage_url, tmp_path)
    q.ensure(["r1", "r2", "r3"])
    q.worker = _gone_worker()  # holding r1
    assert q.claim().run == "r1"
    q.worker = worker_id()
    assert [q.claim().run for _ in range(3)] == ["r1", "r2", "r3"]  # r1 resumes first


def test_a_finished_run_is_redone_once_when_asked_and_a_taken_over_redo_stays_one(storage_url, tmp_path):
    q = _queue(storage_url, tmp_path)
    q.ensure(["r1", "r2"])
    c1, c2 = q.claim(), q.claim()
    q.finish(c1, 0.5, {})
    assert q.redo(["r1", "r2"], lambda run: True) == ["r1"]  # r2 is still running: nothing to redo
    # a second command asking at once enqueues r1 again too: only one of the two trains
    q.study.enqueue_trial({}, user_attrs={"run": "r1", "redo_of": c1.number})
    redo = q.claim()
    assert redo is not None and redo.run == "r1" and redo.number > c1.number
    assert q.claim() is None  # the other redo was a duplicate of this one
    # the redo's holder dies: its takeover is still a redo, not a duplicate of the first trial
    q.storage.set_trial_system_attr(redo.trial_id, "worker", _gone_worker())
    again = q.claim()
    assert again is not None and again.run == "r1" and again.number > redo.number
    q.finish(again, 0.6, {})
    q.finish(c2, 0.7, {})
    assert _states(q) == {"r1": "COMPLETE", "r2": "COMPLETE"}
    assert q.latest()["r1"].number == again.number
    assert q.redo([], lambda run: True) == [] and q.claim() is None
