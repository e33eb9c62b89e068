"""Tests for envs.sandbox's namespaces and totals: what the program sees (/proc, sockets), what
it leaves behind (/tmp, /var/tmp, /dev/shm), and the limits on all its processes and files
together (memory, disk, file count, new user namespaces).

Every program is bounded by a wall limit and by finite loops; tests that need a mechanism this
machine lacks are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

from envs.sandbox import Sandbox, SandboxLimits
from envs.sandbox.probe import PATH, child_command, keep_paths
from tests.requires import sandbox_capability

CAPS = Sandbox.capabilities()


@sandbox_capability("private_proc")
def test_proc_shows_only_the_sandbox() -> None:
    code = (
        "import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nprint(pids)\n"
        "for p in pids:\n    print(open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
    )
    with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
        res = sb.run_python(code)
    lines = res.stdout.splitlines()
    assert lines[0] == "[1, 2]", res.stdout  # init and the program, nothing of the host
    assert "pytest" not in res.stdout and "snippet.py" in lines[2]


@sandbox_capability("private_tmp")
def test_outside_unix_sockets_are_unreachable() -> None:
    token = secrets.token_hex(6)
    paths = [f"/tmp/sbx-sock-{token}", f"/dev/shm/sbx-sock-{token}"]
    paths += [f"/run/sbx-sock-{token}"] if os.access("/run", os.W_OK) else []
    servers = []
    try:
        for path in paths:
            server = socket.socket(socket.AF_UNIX)
            server.bind(path)
            os.chmod(path, 0o777)
            server.listen()
            servers.append(server)
        abstract = socket.socket(socket.AF_UNIX)  # per network namespace
        abstract.bind(f"\0sbx-sock-{token}")
        abstract.listen()
        servers.append(abstract)
        targets = [*paths, f"\0sbx-sock-{token}"]
        code = (
            f"import socket\nfor path in {targets!r}:\n    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n        s.connect(path)\n        print('CONNECTED', repr(path))\n"
            "    except OSError as exc:\n        print('unreachable', type(exc).__name__)\n"
        )
        with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
            res = sb.run_python(code)
        assert "CONNECTED" not in res.stdout and res.stdout.count("unreachable") == len(targets), res
    finally:
        for server in servers:
            server.close()
        for path in paths:
            Path(path).unlink(missing_ok=True)


@sandbox_capability("private_tmp")
def test_tmp_and_shm_writes_do_not_persist() -> None:
    token = secrets.token_hex(6)
    places = [f"/tmp/sbx-{token}", f"/var/tmp/sbx-{token}", f"/dev/shm/sbx-{token}"]
    write = f"for p in {places!r}:\n    open(p, 'wb').write(b'x' * 2**20)\nprint('written')\n"
    look = f"import os\nprint([os.path.exists(p) for p in {places!r}])\n"
    with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
        assert sb.run_python(write).stdout == "written\n"
        assert not any(os.path.exists(p) for p in places)  # never on the host
        assert sb.run_python(look).stdout == "[False, False, False]\n"  # nor in the next run
    assert not any(os.path.exists(p) for p in places)


@sandbox_capability("private_tmp")
def test_tmp_var_tmp_and_shm_share_one_size_limit() -> None:
    code = (
        "written = 0\ntry:\n    for d in ('/tmp', '/dev/shm', '/var/tmp'):\n        for i in range(4):\n"
        "            with open(f'{d}/f{i}', 'wb') as f:\n                f.write(b'0' * 2**22)\n"
        "            written += 4\nfinally:\n    print('written MB', written, flush=True)\n"
    )
    with Sandbox(SandboxLimits(disk_mb=16, max_file_mb=8, wall_seconds=10)) as sb:
        res = sb.run_python(code)
        assert int(res.stdout.split()[-1]) <= 16 and "No space left on device" in res.stderr
        assert res.killed_reason == "disk limit (16 MB, 10000 files)"


@sandbox_capability("private_tmp")
def test_tmp_file_count_is_limited() -> None:
    code = (
        "n = 0\ntry:\n    for i in range(5000):\n        open(f'/tmp/f{i}', 'w').close()\n        n += 1\n"
        "finally:\n    print('files', n, flush=True)\n"
    )
    with Sandbox(SandboxLimits(max_files=200, wall_seconds=10)) as sb:
        res = sb.run_python(code)
        assert int(res.stdout.split()[-1]) < 200 and "No space left on device" in res.stderr


@sandbox_capability("workdir_size_limit")
def test_owned_workdir_total_size_and_file_count_are_limited() -> None:
    big = "written = 0\ntry:\n    for i in range(10):\n        open(f'f{i}', 'wb').write(b'0' * 2**22)\n        written += 4\nfinally:\n    print(written)\n"
    many = "n = 0\ntry:\n    for i in range(5000):\n        open(f'e{i}', 'w').close()\n        n += 1\nfinally:\n    print(n)\n"
    with Sandbox(SandboxLimits(disk_mb=16, max_files=300, max_file_mb=8, wall_seconds=10)) as sb:
        res = sb.run_python(big)
        assert int(res.stdout) <= 16 and res.killed_reason == "disk limit (16 MB, 300 files)"
        assert sum(p.stat().st_size for p in sb.workdir.iterdir()) <= 16 * 2**20
        for p in sb.workdir.glob("f*"):
            p.unlink()
        res = sb.run_python(many)
        assert int(res.stdout) < 300 and "No space left on device" in res.stderr
        assert len(list(sb.workdir.iterdir())) < 300


MEMORY_HOGS = """
import os, select, time
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        os.close(go_w)  # EOF on go_r once the parent closes its end
        block = b'x' * (150 * 2**20)  # written, so resident
        os.write(ready_w, b'1')
        os.read(go_r, 1)  # hold the memory until all are told to stop
        os._exit(0)
    kids.append(pid)
os.close(ready_w)
held, deadline = 0, time.monotonic() + 3
while held < 4 and time.monotonic() < deadline:
    if select.select([ready_r], [], [], 0.2)[0]:
        held += len(os.read(ready_r, 4))
os.close(go_w)
survivors = sum(os.waitpid(pid, 0)[1] == 0 for pid in kids)
print('survivors', survivors, flush=True)
"""


@sandbox_capability("memory_total_limit")
def test_memory_of_all_processes_together_is_limited() -> None:
    # Four processes of 150 MB each: every one is under the 256 MB per-process limit, their
    # sum is not. At most one may hold its memory at the end (two would be 300 MB).
    with Sandbox(SandboxLimits(memory_mb=256, wall_seconds=20)) as sb:
        res = sb.run_python(MEMORY_HOGS)
        assert res.stdout.startswith("survivors") and int(res.stdout.split()[1]) <= 1, res
        assert res.killed_reason == "memory limit (256 MB)"
        assert "memory limit (256 MB) exceeded" in res.as_observation()
        res = sb.run_python("print(1+1)")  # the next run is not blamed for the earlier kill
        assert (res.stdout, res.killed_reason) == ("2\n", None)


def test_program_killed_by_sigkill_is_reported_as_such() -> None:
    with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
        res = sb.run(["sh", "-c", "kill -9 $$"])
        assert res.returncode == -signal.SIGKILL and "memory" in (res.killed_reason or "")


@sandbox_capability("user_namespaces_denied")
def test_new_user_namespaces_are_denied() -> None:
    code = (
        "import ctypes, os, subprocess, threading\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "for name, flags in (('user', 0x10000000), ('user+net', 0x50000000)):\n"
        "    rc = libc.unshare(flags)\n    print(name, rc, os.strerror(ctypes.get_errno()) if rc else 'ok')\n"
        "t = threading.Thread(target=print, args=('thread ok',))\nt.start()\nt.join()\n"
        "print(subprocess.run(['sh', '-c', 'echo child ok'], capture_output=True, text=True).stdout.strip())\n"
    )
    with Sandbox(SandboxLimits(wall_seconds=10)) as sb:
        res = sb.run_python(code)
        assert res.stdout.splitlines() == [
            "user -1 Operation not permitted",
            "user+net -1 Operation not permitted",
            "thread ok",  # threads (clone3 -> ENOSYS -> clone) and subprocesses still work
            "child ok",
        ], res
        if shutil.which("unshare"):
            res = sb.run(["unshare", "--user", "true"])
            assert res.returncode != 0 and "Operation not permitted" in res.stderr


def test_child_helper_imports_only_the_standard_library_and_its_two_siblings() -> None:
    """The child helper runs with the harness's privileges before it is isolated, and before any
    program: it must import neither the project (envs, the package's harness side) nor site
    packages. `-X importtime` lists every module it imports, its probe's forks included."""
    cfg = {"probe": True, "uid": 65534, "gid": 65534, "python": sys.executable, "keep": keep_paths()}
    cmd = child_command(cfg, [])
    cmd[1:1] = ["-X", "importtime"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={"PATH": PATH})
    assert json.loads(done.stdout)["rlimits"] is True, done.stderr[-2000:]  # it ran to the end
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    tops = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in lines[1:]}  # [0]: the header
    siblings = {"child", "namespaces", "limits"}
    assert siblings <= tops
    assert tops - siblings <= sys.stdlib_module_names, tops - siblings - sys.stdlib_module_names


@sandbox_capability("mount_namespace")
def test_tmp_is_private_when_a_kept_path_lives_under_it() -> None:
    # A clone (and its .venv) under /tmp: the kept interpreter is bound back into the private
    # tmpfs. The probe once read that bound-back directory as "the host's /tmp" and gave no
    # private /tmp at all, leaving every file under /tmp readable to the program.
    import tempfile

    from envs.sandbox.probe import PATH, child_command, keep_paths

    kept = Path(tempfile.mkdtemp(prefix="sbx-kept-", dir="/tmp"))
    try:
        cfg = {"probe": True, "uid": 65534, "gid": 65534, "python": sys.executable}
        cfg["keep"] = [*keep_paths(), str(kept)]
        argv = child_command(cfg, [])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={"PATH": PATH})
        assert json.loads(done.stdout)["private_tmp"], done.stderr
    finally:
        kept.rmdir()
