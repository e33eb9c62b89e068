"""`envs.sandbox.files` on what sandboxed code leaves behind (issue 34, item 3): FIFOs and links
where a file is expected, trees deeper than Python's recursion limit and PATH_MAX, directories
without permissions; and the math tool, whose snippet file a run can turn into a FIFO."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from pathlib import Path

import pytest

from envs.math.python_tool import PythonTool, python_limits
from envs.sandbox import Sandbox, SandboxLimits
from envs.sandbox.files import NotRegularFile, read_regular, remove_tree, walk, write_regular


def finishes(fn, seconds: float = 10.0):
    """fn()'s result (or its exception), or a test failure if it blocks (run in a thread: a
    blocked call never hangs the suite)."""
    out: list = []

    def target():
        try:
            out.append((True, fn()))
        except BaseException as exc:
            out.append((False, exc))

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{fn} blocked"
    ok, value = out[0]
    if not ok:
        raise value
    return value


def deep(root: Path, depth: int) -> Path:
    """A chain of `depth` directories under `root`, made with relative paths (past PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        new = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=new))
        os.close(fd)
        fd = new
    os.close(fd)
    return root


def special(kind: str, path: Path):
    """Make a FIFO, a dangling or an outward symlink, or a Unix socket at `path`."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink out":
        os.symlink("/etc/hostname", path)
    elif kind == "dangling symlink":
        os.symlink("/nonexistent/x", path)
    else:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        return sock


@pytest.mark.parametrize("kind", ["fifo", "symlink out", "dangling symlink", "socket"])
def test_special_files_are_refused_without_blocking(tmp_path, kind):
    keep = special(kind, tmp_path / "f.py")
    try:
        with pytest.raises((NotRegularFile, FileNotFoundError)):
            finishes(lambda: read_regular(tmp_path / "f.py", 100))
        with pytest.raises(NotRegularFile):
            finishes(lambda: write_regular(tmp_path, "f.py", b"x"))
        finishes(lambda: write_regular(tmp_path, "f.py", b"x", replace=True))
        assert read_regular(tmp_path / "f.py", 100) == b"x"
    finally:
        if keep is not None:
            keep.close()


def test_writes_never_leave_through_a_linked_directory(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "root").mkdir()
    os.symlink(tmp_path / "out", tmp_path / "root" / "sub")
    for rel in ("sub/x.py", "sub/deeper/x.py", "../x.py", "/etc/x"):
        with pytest.raises(ValueError):
            write_regular(tmp_path / "root", rel, b"x")
    assert list((tmp_path / "out").iterdir()) == [] and not (tmp_path / "x.py").exists()


@pytest.mark.parametrize("depth", [1500, 3000])
def test_deep_trees_are_walked_and_removed(tmp_path, depth):
    root = tmp_path / "t"
    root.mkdir()
    deep(root, depth)
    entries = list(walk(root))  # no RecursionError; past PATH_MAX the insides are left out
    assert ("d", True) in entries and len(entries) > 100
    remove_tree(root)
    assert not root.exists()


@pytest.mark.parametrize("mode", [0o000, 0o100, 0o400, 0o500])
def test_locked_directories_are_removed(tmp_path, mode):
    root = tmp_path / "t"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "a" / "g").write_text("y")
    (root / "a" / "b").chmod(mode)
    (root / "a").chmod(mode)
    root.chmod(mode)
    remove_tree(root)
    assert not root.exists()


LEAVE_A_MESS = """
import os
os.mkfifo("snippet.py.tmp")
fd = os.open(".", os.O_RDONLY)
for _ in range(1200):
    os.mkdir("d", dir_fd=fd)
    new = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = new
os.makedirs("locked/inner")
os.chmod("locked/inner", 0)
os.chmod("locked", 0)
os.remove("snippet.py")
os.mkfifo("snippet.py")
print("left")
"""


@pytest.mark.timeout(120)  # the old writer blocked the event loop itself: fail, never hang
def test_the_math_tool_survives_a_fifo_where_its_snippet_goes():
    async def episode():
        tool = PythonTool(python_limits(cpu_seconds=5))
        try:
            first = await asyncio.wait_for(
                tool("import os\nos.remove('snippet.py')\nos.mkfifo('snippet.py')"), 30
            )
            second = await asyncio.wait_for(tool("print(6 * 7)"), 30)  # used to block forever here
            return first, second, tool.sandbox.workdir
        finally:
            await tool.close()

    first, second, workdir = asyncio.run(episode())
    assert "42" in second, (first, second)
    assert not workdir.exists()


def test_a_sandbox_workdir_is_removed_whatever_the_run_left():
    with Sandbox(SandboxLimits(wall_seconds=30, cpu_seconds=20)) as sb:
        res = sb.run_python(LEAVE_A_MESS)
        workdir = sb.workdir
        assert res.stdout == "left\n", res
        assert "42" in sb.run_python("print(6 * 7)").stdout  # the next run is not blocked
    assert not workdir.exists()
