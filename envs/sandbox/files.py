"""Harness side of `envs.sandbox`: files and trees that sandboxed code may have shaped.

A sandboxed program can leave anything in a directory the harness later touches: a FIFO or a
symlink where the harness expects a file (opening a FIFO for writing blocks until a reader
comes: on the event loop, that stops every episode), trees thousands of directories deep
(`os.walk` and `shutil.rmtree` recurse in Python 3.11 and raise RecursionError; full paths
pass PATH_MAX), directories without read, write or search permission. These helpers never
follow a link, never block on a special file and never recurse:

* `read_regular`: the bytes of a regular file (O_NOFOLLOW | O_NONBLOCK, checked with fstat);
* `write_regular`: a regular file written next to its target and renamed over it, so nothing
  that stood there is ever opened;
* `walk`: the entries of a tree, breadth first, without following links;
* `remove_tree`: removes a tree of any depth with two descriptors at a time: each directory's
  subdirectories are renamed up to the top before it is removed.

Callers must make sure no sandboxed process runs meanwhile (every `Sandbox` run kills what it
started before it returns). Standard library only.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections import deque
from pathlib import Path

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotRegularFile(ValueError):
    """A path that should be a regular file is something else (a FIFO, a link, a device...)."""


def read_regular(path: Path | str, limit: int) -> bytes:
    """Up to `limit` bytes of the regular file `path` (NotRegularFile for anything else, a symlink
    included; FileNotFoundError when there is nothing)."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink; a socket
            raise NotRegularFile(f"not a regular file: {path}") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(f"not a regular file: {path}")
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, its links resolved, stays inside `root` (resolved)."""
    return path.resolve().is_relative_to(root.resolve())


def write_regular(
    root: Path, rel: str, data: bytes, uid: int | None = None, mode: int = 0o644, replace: bool = False
) -> None:
    """Write `data` to `rel` under `root` as a new regular file renamed over the old one.

    ValueError when `rel` leads out of `root` (also through a link in its directories);
    NotRegularFile when something other than a regular file stands at `rel`, unless `replace`
    (then it is removed first; a directory never is). Created directories and the file belong
    to `uid` when one is given.
    """
    if Path(rel).is_absolute() or ".." in Path(rel).parts or not rel.strip():
        raise ValueError(f"file path must stay inside the working directory: {rel!r}")
    target = root / rel
    if not inside(root, target.parent):
        raise ValueError(f"file path leads outside the working directory: {rel!r}")
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if not replace or stat.S_ISDIR(st.st_mode):
            raise NotRegularFile(f"not a regular file: {rel}")
        os.unlink(target)
    _make_parents(root, target.parent, uid)
    for n in itertools.count():
        temp = target.parent / f".{target.name}.rlbench-{os.getpid()}-{n}"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temp, mode)  # not narrowed by the umask
        if uid is not None:
            os.chown(temp, uid, uid, follow_symlinks=False)
        os.replace(temp, target)
    except BaseException:
        os.unlink(temp)
        raise


def _make_parents(root: Path, parent: Path, uid: int | None) -> None:
    """Create the missing directories from `root` down to `parent` (owned by `uid`)."""
    missing = []
    while parent != root and not parent.exists():
        missing.append(parent)
        parent = parent.parent
    for directory in reversed(missing):
        directory.mkdir()
        if uid is not None:
            os.chown(directory, uid, uid, follow_symlinks=False)


def walk(root: Path, skip: frozenset[str] = frozenset(), limit: int = 200_000):
    """(relative path, is a directory) of every entry under `root`, breadth first, links listed
    and never followed, at most `limit` entries; the insides of directories named in `skip`,
    and of those past PATH_MAX or unreadable, are left out."""
    queue, seen = deque([""]), 0
    while queue:
        rel = queue.popleft()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError:
            continue
        for entry in sorted(entries, key=lambda e: e.name):
            seen += 1
            if seen > limit:
                return
            path = f"{rel}/{entry.name}" if rel else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and entry.name not in skip:
                queue.append(path)
            yield path, is_dir


def _open_dir(name: str, parent_fd: int | None) -> int:
    """A descriptor of directory `name` (made readable and searchable when it was not)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent_fd)  # a directory the sandboxed program locked
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def remove_tree(path: Path | str) -> None:
    """Remove `path` and everything under it, whatever its depth or permissions (module
    docstring); a link or a file at `path` is removed itself. OSError if something stays."""
    path = str(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    top = _open_dir(path, None)
    try:
        pending, names = deque([None]), itertools.count()
        while pending:
            name = pending.popleft()
            fd = top if name is None else _open_dir(name, top)
            try:
                if name is None and not os.access(path, os.W_OK):
                    os.chmod(fd, 0o700)
                for entry in list(os.scandir(fd)):
                    if entry.is_dir(follow_symlinks=False):
                        moved = f".rlbench-rm-{next(names)}"
                        while os.path.lexists(f"{path}/{moved}"):
                            moved = f".rlbench-rm-{next(names)}"
                        os.chmod(entry.name, 0o700, dir_fd=fd)  # moving and emptying it need w+x
                        os.rename(entry.name, moved, src_dir_fd=fd, dst_dir_fd=top)
                        pending.append(moved)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
            finally:
                if fd != top:
                    os.close(fd)
            if name is not None:
                os.rmdir(name, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(path)
