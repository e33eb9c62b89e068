"""Tests for envs.sandbox: each limit is contained, reported clearly, and the harness goes on.

Every dangerous program here is bounded twice: by the limit under test and by a small wall
limit or a finite loop, so a limit that fails cannot hang or overload the machine. Tests that
need an isolation mechanism this machine lacks are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from pathlib import Path

import pytest

from envs.sandbox import Sandbox, SandboxLimits, SandboxResult
from tests.requires import sandbox_capability

CAPS = Sandbox.capabilities()


def still_works(sb: Sandbox) -> None:
    """The sandbox (and the harness) keep running normally after a contained failure."""
    res = sb.run_python("print(1+1)")
    assert (res.returncode, res.stdout, res.killed_reason) == (0, "2\n", None)


@pytest.fixture
def box():
    with Sandbox(SandboxLimits(wall_seconds=10, cpu_seconds=5)) as sb:
        yield sb


def test_capabilities_report() -> None:
    assert CAPS["rlimits"] is True
    for key in (
        "network_namespace",
        "unprivileged_uid",
        "process_limit",
        "file_isolation",
        "mount_namespace",
    ):
        assert isinstance(CAPS[key], bool)


def test_print_returns_2(box: Sandbox) -> None:
    res = box.run_python("print(1+1)")
    assert res.stdout == "2\n" and res.returncode == 0 and not res.timed_out and not res.truncated
    assert res.as_observation() == "2"


def test_infinite_loop_stopped_by_cpu_limit() -> None:
    with Sandbox(SandboxLimits(cpu_seconds=1, wall_seconds=15)) as sb:
        res = sb.run_python("while True:\n    pass\n")
        assert not res.timed_out and res.returncode == -24  # SIGXCPU
        assert res.killed_reason == "cpu time limit (1 s)"
        assert "cpu time limit (1 s) exceeded" in res.as_observation()
        still_works(sb)


def test_infinite_loop_and_children_stopped_by_wall_limit() -> None:
    with Sandbox(SandboxLimits(cpu_seconds=10, wall_seconds=1)) as sb:
        res = sb.run_python("while True:\n    pass\n")
        assert res.timed_out and res.killed_reason == "wall time limit (1 s)" and res.seconds < 5
        assert "wall time limit (1 s) exceeded; the program was killed" in res.as_observation()
        t = time.monotonic()  # a shell whose children keep running: the whole group goes
        res = sb.run(["sh", "-c", "sleep 60 & sleep 60"])
        assert res.timed_out and time.monotonic() - t < 5
        still_works(sb)


def test_memory_hog_gets_memory_error() -> None:
    with Sandbox(SandboxLimits(memory_mb=256, wall_seconds=10)) as sb:
        res = sb.run_python("x = bytearray(4 * 1024**3)\nprint('allocated')")
        assert "allocated" not in res.stdout and "MemoryError" in res.stderr
        assert res.killed_reason == "memory limit (256 MB)"
        assert "memory limit (256 MB) exceeded" in res.as_observation()
        res = sb.run_python("chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024**2))\n")
        assert res.killed_reason == "memory limit (256 MB)" and not res.timed_out
        still_works(sb)


def test_10gb_write_stopped_at_file_size_limit() -> None:
    with Sandbox(SandboxLimits(max_file_mb=8, wall_seconds=10)) as sb:
        code = "chunk = b'0' * 2**20\nwith open('big', 'wb') as f:\n    for _ in range(10 * 1024):\n        f.write(chunk)\n"
        res = sb.run_python(code)
        assert res.killed_reason == "file size limit (8 MB)" and "File too large" in res.stderr
        assert (sb.workdir / "big").stat().st_size <= 8 * 2**20
        res = sb.run(["dd", "if=/dev/zero", "of=big2", "bs=1M", "count=10240"])  # a C program: SIGXFSZ
        assert res.returncode == -25 and res.killed_reason == "file size limit (8 MB)"
        assert "file size limit (8 MB) exceeded" in res.as_observation()
        assert (sb.workdir / "big2").stat().st_size <= 8 * 2**20
        still_works(sb)


@sandbox_capability("process_limit")
def test_fork_bomb_is_bounded_by_process_limit() -> None:
    # A finite fork loop (300 attempts, children exit after 2 s) under a 10 s wall limit.
    code = (
        "import os, time\nn = 0\ntry:\n    for _ in range(300):\n        if os.fork() == 0:\n"
        "            time.sleep(2)\n            os._exit(0)\n        n += 1\n"
        "finally:\n    print('forked', n, flush=True)\n"
    )
    with Sandbox(SandboxLimits(max_processes=16, wall_seconds=10)) as sb:
        res = sb.run_python(code)
        assert int(res.stdout.split()[1]) < 16 and "BlockingIOError" in res.stderr
        assert res.killed_reason == "process limit (16)" and not res.timed_out
        assert "process limit (16) exceeded" in res.as_observation()
        still_works(sb)


@sandbox_capability("file_isolation")
def test_files_outside_workdir_are_unreadable(tmp_path: Path, box: Sandbox) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "sentinel.txt").write_text("TOP-SECRET-SENTINEL")
    code = (
        "import os\nfor path in [{!r}, '/etc/shadow']:\n    try:\n        print(open(path).read())\n"
        "    except OSError as exc:\n        print(type(exc).__name__, path)\n"
        "print('root:', os.listdir('/root'))\n"
    ).format(str(private / "sentinel.txt"))
    res = box.run_python(code)
    assert "TOP-SECRET-SENTINEL" not in res.stdout and "root:x:0" not in res.stdout
    # The sentinel lies under /tmp, which the program sees as its private tmpfs: hidden there
    # (FileNotFoundError) where the machine has a mount namespace, unreadable otherwise.
    lines = res.stdout.splitlines()
    assert lines[0].split()[0] in ("PermissionError", "FileNotFoundError")
    assert lines[1].split()[0] == "PermissionError"
    assert ".bashrc" not in res.stdout  # /root is hidden (or unreadable)
    still_works(box)


@sandbox_capability("network_namespace")
def test_no_network_to_host_listener() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('CONNECTED')\nexcept OSError as exc:\n    print('blocked:', exc)\n"
        )
        with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
            res = sb.run_python(code)
            assert "blocked:" in res.stdout and "CONNECTED" not in res.stdout
            with pytest.raises(BlockingIOError):
                server.accept()
            still_works(sb)
        with Sandbox(SandboxLimits(wall_seconds=10, network=True)) as sb:  # control: allowed
            assert "CONNECTED" in sb.run_python(code).stdout


@sandbox_capability("parent_kill_protection")
def test_killing_the_parent_fails(box: Sandbox) -> None:
    harness = os.getpid()
    attempt = (
        "import os, signal\nfor name, pid in [('parent', os.getppid()), ('harness', {pid})]:\n"
        "    try:\n        os.kill(pid, {sig})\n        print(name, 'sent')\n"
        "    except OSError as exc:\n        print(name, type(exc).__name__)\nprint('still running')\n"
    )
    # Safety first: signal 0 only checks. Never send SIGKILL unless the harness is out of reach.
    probe = box.run_python(attempt.format(pid=harness, sig="0"))
    assert "harness sent" not in probe.stdout and "still running" in probe.stdout
    res = box.run_python(attempt.format(pid=harness, sig="signal.SIGKILL"))
    # Out of reach: another uid (PermissionError) or another pid namespace (ProcessLookupError);
    # in a pid namespace the "parent" is the namespace's init, which ignores the signal.
    assert "harness PermissionError" in res.stdout or "harness ProcessLookupError" in res.stdout
    assert "still running" in res.stdout and res.returncode == 0
    assert os.getpid() == harness  # this test process survived
    still_works(box)


def test_output_flood_is_truncated_and_endless_flood_killed() -> None:
    with Sandbox(SandboxLimits(max_output_chars=2000, wall_seconds=10)) as sb:
        res = sb.run_python("for i in range(20000):\n    print(i)\n")
        assert res.truncated and res.returncode == 0 and not res.timed_out
        assert res.stdout.startswith("0\n1\n2\n") and res.stdout.endswith("19999\n")
        assert len(res.stdout) < 2200 and "bytes of output omitted" in res.stdout
        assert res.killed_reason == "output truncated (2000 chars)"
        t = time.monotonic()
        res = sb.run_python("while True:\n    print('y' * 1000)\n")
        assert res.truncated and not res.timed_out and time.monotonic() - t < 8
        assert res.killed_reason == "output limit (200000 chars)" and len(res.stdout) < 2200
        assert "the program was killed" in res.as_observation()
        still_works(sb)


def test_environment_not_leaked(monkeypatch: pytest.MonkeyPatch, box: Sandbox) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2-do-not-leak")
    res = box.run(["env"])
    assert "hunter2" not in res.stdout and "SECRET_TOKEN" not in res.stdout
    env = dict(line.split("=", 1) for line in res.stdout.splitlines())
    assert env["HOME"] == str(box.workdir) and env["PYTHONHASHSEED"] == "0"
    res = box.run_python("import os; print(os.getcwd()); print(os.environ.get('SECRET_TOKEN'))")
    assert res.stdout.split() == [str(box.workdir), "None"]


def test_concurrent_arun_of_four_sandboxes() -> None:
    async def episode(i: int) -> SandboxResult:
        with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
            return await sb.arun_python(f"import time\ntime.sleep(1)\nprint({i})")

    async def main() -> list[SandboxResult]:
        return await asyncio.gather(*(episode(i) for i in range(4)))

    t = time.monotonic()
    results = asyncio.run(main())
    assert [r.stdout for r in results] == ["0\n", "1\n", "2\n", "3\n"]
    assert time.monotonic() - t < 3.5  # sequential would take more than 4 s


def test_background_processes_do_not_outlive_a_run(box: Sandbox) -> None:
    t = time.monotonic()
    res = box.run(["sh", "-c", "sleep 60 & setsid sleep 61 >/dev/null 2>&1 & echo started"])
    assert res.stdout == "started\n" and not res.timed_out and time.monotonic() - t < 5
    if CAPS["kill_escaped_processes"]:
        uid = (box.workdir).stat().st_uid
        left = [p for p in os.listdir("/proc") if p.isdigit() and _uid_of(p) == uid]
        assert left == []


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_files_written_and_symlink_escape_refused(box: Sandbox) -> None:
    res = box.run(["cat", "sub/in.txt"], files={"sub/in.txt": "hello"})
    assert res.stdout == "hello"
    assert box.run(["cat"], stdin="piped").stdout == "piped"
    box.run(["ln", "-s", "/etc", "etclink"])
    with pytest.raises(ValueError):
        box.run(["true"], files={"etclink/sandbox-evil.conf": "x"})
    with pytest.raises(ValueError):
        box.run(["true"], files={"../evil.txt": "x"})
    assert not Path("/etc/sandbox-evil.conf").exists()


def test_close_removes_workdir() -> None:
    sb = Sandbox()
    sb.run_python("open('x.txt', 'w').write('x')")
    workdir = sb.workdir
    sb.close()
    assert not workdir.exists()
    sb.close()  # idempotent
