"""Tests for envs.sandbox when the harness dies: nothing of a run outlives it or its wall
limit, and the next start removes what it left (processes, working directory, cgroups).

Every program here is bounded by a wall limit and, where the harness is killed on purpose, by
a deadline in the test; tests that need a mechanism this machine lacks are skipped with the
reason.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envs import sandbox as sandbox_module
from envs.sandbox import Sandbox, SandboxLimits
from envs.sandbox.host import UID_BASE, UID_SLOTS, FreeSlots
from tests.requires import sandbox_capability, sandbox_missing

CAPS = Sandbox.capabilities()
REPO = Path(__file__).resolve().parents[3]


def pids_with(marker: str) -> list[int]:
    """Live processes whose command line contains `marker` (zombies have none)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except (OSError, ValueError):
            pass
    return found


HARNESS = """
import sys
sys.path.insert(0, {repo!r})
from envs.sandbox import Sandbox, SandboxLimits
sb = Sandbox(SandboxLimits(wall_seconds=12))
print(sb.workdir, flush=True)
sb.run([sys.executable, "-c", "import time\\nopen('started', 'w').close()\\nwhile True: time.sleep(1)  # {marker}"])
"""


@sandbox_capability("parent_death_kill")
@pytest.mark.slow
def test_kill_9_of_the_harness_kills_the_run_and_next_start_cleans_up() -> None:
    marker = f"sbx-orphan-{secrets.token_hex(6)}"
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS.format(repo=str(REPO), marker=marker)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        workdir = Path(harness.stdout.readline().strip())
        deadline = time.monotonic() + 15
        while not (workdir / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (workdir / "started").exists(), "the sandboxed program did not start"
        assert len(pids_with(marker)) >= 2  # the child helper, init and the program
    finally:
        harness.kill()  # SIGKILL: no finalizer, no close()
        harness.wait()
    killed_at = time.monotonic()
    while pids_with(marker) and time.monotonic() - killed_at < 5:
        time.sleep(0.05)
    assert pids_with(marker) == [], "processes of the run outlived the harness"
    assert time.monotonic() - killed_at < 12  # well within the wall limit: at once
    assert workdir.exists()  # the dead harness could not remove it ...
    Sandbox().close()  # ... the next start does
    assert not workdir.exists() and not Path(f"{workdir}.lock").exists()


def _free_slot() -> int:
    """A uid slot that no live Sandbox holds (checked by taking, then releasing, its lock)."""
    for slot in range(UID_SLOTS - 1, 0, -1):
        free = FreeSlots(None)
        try:
            if free(UID_BASE + slot):
                return slot
        finally:
            free.close()
    raise RuntimeError("no free slot")


@sandbox_capability("unprivileged_uid")
def test_next_start_kills_strays_of_sandbox_uids_nobody_holds() -> None:
    # A stray, as a harness without a pid namespace would leave it: a process of a sandbox uid
    # whose slot lock is free (its Sandbox is gone).
    uid = UID_BASE + _free_slot()
    stray = subprocess.Popen(["sleep", "30"], user=uid, group=uid, extra_groups=[])
    try:
        Sandbox().close()
        assert stray.wait(timeout=5) == -signal.SIGKILL
    finally:
        stray.kill()
        stray.wait()


@pytest.mark.parametrize("pid_namespace", [True, False])
def test_wall_limit_holds_without_the_harness(monkeypatch: pytest.MonkeyPatch, pid_namespace: bool) -> None:
    """The child helper is started directly, and nobody enforces the wall limit from outside:
    init's alarm (pid namespace) or the program's inherited alarm (without) must end it."""
    if pid_namespace and not CAPS["pid_namespace"]:
        pytest.skip(sandbox_missing("pid_namespace"))
    caps = {**CAPS, "pid_namespace": pid_namespace, "private_proc": CAPS["private_proc"] and pid_namespace}
    monkeypatch.setattr(sandbox_module.Sandbox, "capabilities", staticmethod(lambda: caps))
    with Sandbox(SandboxLimits(wall_seconds=1)) as sb:
        t = time.monotonic()
        child = subprocess.Popen(
            sb._command(["sleep", "30"]), cwd=sb.workdir, env=sb._env(None), start_new_session=True
        )
        try:
            rc = child.wait(timeout=10)
        finally:
            child.kill()
        expected = -signal.SIGKILL if pid_namespace else -signal.SIGALRM
        assert rc == expected and time.monotonic() - t < 6


def test_runs_without_any_isolation_mechanism(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with none of the mechanisms: the run still works, and capabilities say so."""
    bare = {key: False for key in CAPS} | {"rlimits": True}
    monkeypatch.setattr(sandbox_module.Sandbox, "capabilities", staticmethod(lambda: bare))
    with Sandbox(SandboxLimits(wall_seconds=2)) as sb:
        assert not sb.capabilities()["private_tmp"]
        res = sb.run_python("import os\nprint(1+1, os.getcwd())")
        assert (res.returncode, res.stdout) == (0, f"2 {sb.workdir}\n")
        res = sb.run(["sleep", "30"])
        assert res.timed_out and res.seconds < 6
