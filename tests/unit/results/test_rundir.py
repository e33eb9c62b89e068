"""The run-dir contract's crash safety: checkpoint manifests catch damaged files, a resume
finds the newest intact checkpoint, one process at a time holds a run dir, torn lines are
ignored; how a run ended reads back typed, a run that died without a word as killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from results.budgets import BudgetKind
from results.rundir import MANIFEST, RunDir, RunDirError, RunEnd, RunOutcome, verify_checkpoint

REPO = Path(__file__).resolve().parents[3]


def _checkpoint(run: RunDir, step: int, keep_last: int = 0) -> Path:
    tmp = run.begin_checkpoint(step)
    (tmp / "policy").mkdir()
    (tmp / "policy" / "model.safetensors").write_bytes(os.urandom(4096))
    (tmp / "learner.pt").write_bytes(os.urandom(512))
    return run.commit_checkpoint(tmp, step, keep_last)


def test_a_checkpoint_lists_every_file_with_its_size_and_hash(tmp_path):
    checkpoint = _checkpoint(RunDir(tmp_path / "run"), 2)
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    assert manifest["step"] == 2
    assert set(manifest["files"]) == {"policy/model.safetensors", "learner.pt"}
    assert (
        manifest["files"]["learner.pt"]["size"] == 512
        and len(manifest["files"]["learner.pt"]["sha256"]) == 64
    )
    assert verify_checkpoint(checkpoint) is None


@pytest.mark.parametrize(
    "damage, expected",
    [
        (
            lambda c: (c / "policy" / "model.safetensors").write_bytes(b"x" * 100),
            "has 100 bytes, 4096 were written",
        ),
        (lambda c: (c / "learner.pt").unlink(), "learner.pt is missing"),
        (lambda c: (c / "learner.pt").write_bytes(b"\0" * 512), "learner.pt does not match the hash"),
        (lambda c: (c / MANIFEST).write_text("{trunc"), "manifest.json is unreadable"),
        (lambda c: (c / MANIFEST).unlink(), "no manifest.json and incomplete"),
    ],
)
def test_a_damaged_checkpoint_says_what_is_wrong(tmp_path, damage, expected):
    checkpoint = _checkpoint(RunDir(tmp_path / "run"), 2)
    if expected.startswith("no manifest"):
        (
            checkpoint / "learner.pt"
        ).unlink()  # a legacy (manifest-less) checkpoint is trusted only when complete
    damage(checkpoint)
    assert expected in verify_checkpoint(checkpoint)


def test_the_newest_intact_checkpoint_is_found_behind_damaged_ones(tmp_path):
    run = RunDir(tmp_path / "run")
    for step in (2, 4, 6):
        _checkpoint(run, step)
    (run.checkpoint_dir(6) / "learner.pt").write_bytes(b"")  # truncated
    (run.checkpoint_dir(4) / "policy" / "model.safetensors").unlink()
    intact, damaged = run.latest_intact_checkpoint()
    assert intact == run.checkpoint_dir(2)
    assert [(p.name, why.split(" ")[0]) for p, why in damaged] == [
        ("step_000006", "learner.pt"),
        ("step_000004", "policy/model.safetensors"),
    ]
    for step in (2, 4, 6):
        (run.checkpoint_dir(step) / "learner.pt").unlink()
    assert run.latest_intact_checkpoint()[0] is None


def test_a_checkpoint_interrupted_before_its_rename_is_not_listed(tmp_path):
    run = RunDir(tmp_path / "run")
    _checkpoint(run, 2)
    tmp = run.begin_checkpoint(4)  # killed while writing step 4
    (tmp / "learner.pt").write_bytes(b"half")
    assert [p.name for p in run.list_checkpoints()] == ["step_000002"]


def _holder(path: Path) -> subprocess.Popen:
    """A second process that locks `path` and then sleeps."""
    code = (
        f"from results.rundir import RunDir; RunDir({str(path)!r}).lock(); print('locked', flush=True); "
        "import time; time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_run_dir_is_held_by_one_process_and_freed_when_it_dies(tmp_path):
    run = RunDir(tmp_path / "run")
    proc = _holder(run.path)
    try:
        with pytest.raises(RunDirError, match=f"is in use by pid {proc.pid}"):
            run.lock()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.time() + 5
    while True:  # the kernel drops an flock with its holder, even on SIGKILL
        try:
            run.lock()
            break
        except RunDirError:
            assert time.time() < deadline
            time.sleep(0.05)
    run.lock()  # a second lock in the holding process is a no-op
    run.unlock()


def test_a_run_marked_running_reads_as_killed_once_no_process_holds_it(tmp_path):
    run = RunDir(tmp_path / "run")
    assert run.read_outcome() is None  # never started training
    run.lock()
    run.mark_running()
    end = run.read_outcome()
    assert (end.outcome, end.pid) == (RunOutcome.RUNNING, os.getpid())  # this process holds it
    run.unlock()
    end = run.read_outcome()  # it ended without recording how (SIGKILL, a lost machine)
    assert end.outcome is RunOutcome.KILLED and "without recording an outcome" in end.detail
    proc = _holder(run.path)
    try:
        assert run.is_locked() and run.read_outcome().outcome is RunOutcome.RUNNING
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


def test_a_forked_child_does_not_keep_its_parents_run_locked(tmp_path):
    """The rollout engine is a forked child of the training process: once that is killed, the run
    is free (and reads as killed) even while the child lives on for a moment."""
    run = RunDir(tmp_path / "run")
    code = (
        f"import multiprocessing, time; from results.rundir import RunDir; RunDir({str(run.path)!r}).lock(); "
        "ctx = multiprocessing.get_context('fork'); ready = ctx.Event(); "
        "child = ctx.Process(target=lambda: (ready.set(), time.sleep(30))); child.start(); "
        # the child's fork hooks have run once it runs its target (a loaded machine may not have
        # scheduled it yet when start() returns: the test then raced the hook)
        "ready.wait(30); print(child.pid, flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not run.is_locked()
    finally:
        os.kill(child, signal.SIGKILL)


def test_summaries_written_before_outcomes_read_as_finished(tmp_path):
    run = RunDir(tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 3, "stopped_by": "minutes"}))
    assert run.read_outcome() == RunEnd(RunOutcome.FINISHED, BudgetKind.MINUTES)
    (tmp_path / "summary.json").write_text(json.dumps({"steps": 3, "stopped_by": "another rank's budget"}))
    assert run.read_outcome() == RunEnd(RunOutcome.FINISHED, None)  # an untyped reason of then


def test_a_readers_probe_of_the_lock_never_makes_a_starting_run_busy(tmp_path):
    """`is_locked` takes the lock for an instant; `lock` retries for LOCK_WAIT_S, so a run that
    starts during a probe (here: a lock held for 0.3 s) still gets its directory."""
    run = RunDir(tmp_path / "run")
    code = (
        f"import fcntl, os, time; fd = os.open({str(run.path / 'run.lock')!r}, os.O_RDWR | os.O_CREAT); "
        "fcntl.flock(fd, fcntl.LOCK_SH); print('held', flush=True); time.sleep(0.3)"
    )
    run.path.mkdir()
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    run.lock()  # waits for the probe to let go
    proc.wait()
    run.unlock()


def test_torn_last_lines_are_ignored(tmp_path):
    run = RunDir.create(tmp_path / "run", {"algo": "sao"}, {})
    run.append_metrics({"step": 1, "loss": float("nan")})
    run.append_event({"event": "resume", "from_step": 0})
    with open(run.metrics_path, "a") as f:
        f.write('{"step": 2, "lo')
    with open(run.path / "events.jsonl", "a") as f:
        f.write('{"ev')
    assert run.read_metrics() == [{"step": 1, "loss": None}]
    assert [e["event"] for e in run.read_events()] == ["resume"]


def test_a_placed_rank_records_the_placing_process_as_the_attempt(tmp_path, monkeypatch):
    # a run whose `bench run` places learner ranks is waited for as that process: its ranks'
    # outcome must name it, or a comparison takes a finished run for a failed one
    from results.rundir import ATTEMPT_PID_VARIABLE, attempt_pid

    assert attempt_pid() == os.getpid()
    monkeypatch.setenv(ATTEMPT_PID_VARIABLE, "4242")
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.mark_running()
    assert run.read_outcome().pid == 4242


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_child_started_with_die_with_parent_ends_when_its_parent_is_killed(sig):
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, subprocess, sys, time\n"
            "from results.rundir import die_with_parent\n"
            f"child = subprocess.Popen(['sleep', '60'], preexec_fn=lambda: die_with_parent({int(sig)}))\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)  # still there (or a zombie, until init reaps it)
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its killed parent by 10 s")


def _launcher_with_a_rank(attempt_pid: str) -> tuple[subprocess.Popen, int]:
    """A 'launcher' process whose child (a 'rank') calls `stop_with_launcher` with
    ATTEMPT_PID_VARIABLE = `attempt_pid`, then prints 'terminated' on SIGTERM or waits 20 s;
    (the launcher, the rank's pid)."""
    rank = (
        "import os, signal, sys, time\n"
        "from results.rundir import stop_with_launcher\n"
        "signal.signal(signal.SIGTERM, lambda *_: (print('terminated', flush=True), os._exit(0)))\n"
        "stop_with_launcher()\n"
        "print(os.getpid(), flush=True)\n"
        "time.sleep(20)\n"
    )
    launcher = (
        "import os, subprocess, sys, time\n"
        f"env = {{**os.environ, 'BENCH_ATTEMPT_PID': {attempt_pid!r}}}\n"
        f"subprocess.Popen([sys.executable, '-c', {rank!r}], env=env)\n"
        "time.sleep(20)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", launcher],
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.PIPE,
        text=True,
    )
    return proc, int(proc.stdout.readline())


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_PDEATHSIG is Linux's")
def test_a_placed_rank_is_terminated_when_its_launcher_is_killed_outright():
    # Ray SIGKILLs a killed learner actor's torchrun; its ranks must not train on beside the
    # attempt that replaces them: they get SIGTERM (and checkpoint) when their launcher dies
    from results.rundir import ATTEMPT_PID_VARIABLE

    assert ATTEMPT_PID_VARIABLE == "BENCH_ATTEMPT_PID"
    launcher, rank = _launcher_with_a_rank("4242")
    launcher.kill()
    launcher.wait()
    assert launcher.stdout.readline().strip() == "terminated"  # the rank's handler ran
    # without the variable (a rank bench did not place) nothing is asked of the kernel
    launcher, rank = _launcher_with_a_rank("")
    launcher.kill()
    launcher.wait()
    time.sleep(0.5)
    try:
        with open(f"/proc/{rank}/stat") as f:
            assert f.read().split(")")[-1].split()[0] != "Z"  # still running, not terminated
    finally:
        os.kill(rank, signal.SIGKILL)
