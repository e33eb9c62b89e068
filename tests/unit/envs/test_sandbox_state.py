"""What a sandboxed program leaves behind outside its working directory, and what it can read
(issue 34, item 3): kernel keys, SysV and POSIX IPC, world-writable directories, and the
machine's data (home directories, checkouts, this project's source tree). Each class is tried
with several payloads; a program never sees or keeps any of it once its `Sandbox` is closed.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from envs.sandbox import Sandbox, SandboxLimits
from envs.sandbox.probe import PROJECT_TREE, default_cover
from tests.requires import sandbox_capability

CAPS = Sandbox.capabilities()
LIMITS = SandboxLimits(wall_seconds=15)


KEYCTL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[os.uname().machine]
def call(*args):
    r = libc.syscall(*args)
    return r, ctypes.get_errno()
"""
KEY_PAYLOADS = {  # each must fail: what it would create is global to the uid
    "add_key to the user keyring": "r, e = call(NR[0], b'user', b'k{t}', b'secret', 6, -4)",
    "add_key to the user session keyring": "r, e = call(NR[0], b'user', b'k{t}', b'secret', 6, -5)",
    "add_key to the session keyring": "r, e = call(NR[0], b'user', b'k{t}', b'secret', 6, -3)",
    "keyctl join a named session": "r, e = call(NR[2], 1, b'rlbench-{t}')",
    "keyctl get the persistent keyring": "r, e = call(NR[2], 22, -1, -4)",
    "request_key": "r, e = call(NR[1], b'user', b'k{t}', None, -4)",
}


@sandbox_capability("user_namespaces_denied")
@pytest.mark.parametrize("name", list(KEY_PAYLOADS))
def test_kernel_keys_cannot_be_made_in_a_sandbox(name) -> None:
    token = secrets.token_hex(4)
    code = KEYCTL + KEY_PAYLOADS[name].format(t=token) + "\nprint(r, e)\n"
    with Sandbox(LIMITS) as sb:
        res = sb.run_python(code)
        look = sb.run_python(KEYCTL + "print(call(NR[2], 0, -4, 0))\n")  # KEYCTL_GET_KEYRING_ID
    assert res.stdout.split() == ["-1", "1"], res  # EPERM
    assert look.stdout.strip() == "(-1, 1)", look


IPC = """
import ctypes, ctypes.util, os, sys
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL(ctypes.util.find_library("rt") or None, use_errno=True)
KEY = {key}
def made():
    found = []
    if libc.shmget(KEY, 0, 0) != -1: found.append("shm")
    if libc.semget(KEY, 0, 0) != -1: found.append("sem")
    if libc.msgget(KEY, 0) != -1: found.append("msg")
    q = rt.mq_open(b"/rlbench-{token}", os.O_RDONLY)
    if q != -1: found.append("mq")
    if os.path.exists("/dev/shm/rlbench-{token}"): found.append("posix shm")
    return found
if sys.argv[-1:] == ["make"] or "{mode}" == "make":
    assert libc.shmget(KEY, 4096, 0o1666) != -1
    assert libc.semget(KEY, 1, 0o1666) != -1
    assert libc.msgget(KEY, 0o1666) != -1
    assert rt.mq_open(b"/rlbench-{token}", os.O_CREAT | os.O_RDWR, 0o666, None) != -1
    open("/dev/shm/rlbench-{token}", "w").write("x")
print(made())
"""


@sandbox_capability("private_tmp")
def test_ipc_objects_do_not_outlive_a_run_or_the_sandbox() -> None:
    key, token = 0x5EB0 + secrets.randbelow(1000), secrets.token_hex(4)
    with Sandbox(LIMITS) as sb:
        made = sb.run_python(IPC.format(key=key, token=token, mode="make"))
        later = sb.run_python(IPC.format(key=key, token=token, mode="look"))
    assert made.stdout.strip() == "['shm', 'sem', 'msg', 'mq', 'posix shm']", made
    assert later.stdout.strip() == "[]", later
    for table in ("shm", "sem", "msg"):  # nor on the host, in its own IPC namespace
        rows = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        assert all(int(row.split()[0]) != key for row in rows)
    assert (
        not Path(f"/dev/mqueue/rlbench-{token}").exists() and not Path(f"/dev/shm/rlbench-{token}").exists()
    )


WRITABLE = """
import os, stat
found = []
stack = ["/etc", "/var", "/run", "/usr", "/opt", "/home", "/srv", "/mnt", "/media", "/work", "/root"]
while stack:
    d = stack.pop()
    try:
        entries = list(os.scandir(d))
    except OSError:
        continue
    if os.access(d, os.W_OK) and d not in {private!r}:
        found.append(d)
    stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
print(sorted(found))
"""


@sandbox_capability("unprivileged_uid")
def test_no_directory_outside_the_private_ones_is_writable() -> None:
    # what a run could leave for the next one: files in a directory it may write
    with Sandbox(LIMITS) as sb:
        res = sb.run_python(WRITABLE.format(private=["/var/tmp", str(sb.workdir)]))
    assert res.stdout.strip() == "[]", res


@sandbox_capability("mount_namespace")
@pytest.mark.parametrize(
    "path",
    [PROJECT_TREE, f"{PROJECT_TREE}/envs/swe/mini/swe_mini.jsonl", f"{PROJECT_TREE}/.git", "/home", "/opt"],
)
def test_the_machines_data_and_this_project_are_covered(path) -> None:
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    code = (
        f"import os\np = {path!r}\nprint(sorted(os.listdir(p)) if os.path.isdir(p) else os.path.exists(p))\n"
    )
    with Sandbox(LIMITS) as sb:
        res = sb.run_python(code)
    kept = [Path(p).name for p in (os.path.realpath(os.sys.prefix),) if p.startswith(path + "/")]
    # a cover is an empty directory holding only the paths to what is kept; all else below it is gone
    below_a_cover = any(path.startswith(c + "/") for c in default_cover())
    expected = repr(sorted(kept)) if os.path.isdir(path) and (kept or not below_a_cover) else "False"
    assert res.stdout.strip() == expected, res
    assert path in default_cover() or any(path.startswith(c + "/") for c in default_cover())


@sandbox_capability("mount_namespace")
def test_installed_packages_stay_importable_under_the_cover() -> None:
    with Sandbox(LIMITS) as sb:
        res = sb.run_python("import json, numpy\nprint('ok')\n")
    assert res.stdout == "ok\n", res


@sandbox_capability("unprivileged_uid")
def test_a_world_writable_system_directory_keeps_nothing(monkeypatch) -> None:
    import envs.sandbox.probe as probe

    planted = Path(f"/var/rlbench-ww-{secrets.token_hex(4)}")  # as /var/crash is on some systems
    planted.mkdir(mode=0o1777)
    planted.chmod(0o1777)
    probe._world_writable.cache_clear()
    try:
        assert str(planted) in default_cover()
        code = f"open({str(planted)!r} + '/left', 'w').write('for the next run')\n"
        with Sandbox(LIMITS) as sb:
            res = sb.run_python(code)
        assert "PermissionError" in res.stderr or "FileNotFoundError" in res.stderr, res
        assert list(planted.iterdir()) == []
    finally:
        planted.rmdir()
        probe._world_writable.cache_clear()


def test_an_installed_package_keeps_its_site_packages_but_not_its_answers(monkeypatch) -> None:
    import sys

    import envs.sandbox.probe as probe

    site = os.path.join(os.path.realpath(sys.prefix), "lib", "site-packages")
    monkeypatch.setattr(probe, "PROJECT_TREE", site)
    monkeypatch.setattr(probe, "ANSWER_DIRS", (f"{site}/envs/swe/mini",))
    cover = default_cover()
    assert site not in cover and f"{site}/envs/swe/mini" in cover
