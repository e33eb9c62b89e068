"""Harness side of `envs.sandbox`: uids, working directories, leftovers, output, diagnosis.

* Dedicated uids come from a high range no distribution hands out; a lock file per slot in a
  root-only directory keeps them unique across all harness processes on the machine, and a
  slot whose lock nobody holds belongs to no live `Sandbox`: whatever still runs under its uid
  (or sits in its cgroup) is a leftover of a killed harness, removed by the next start.
* An owned working directory is ``rlbench-sbx-XXXX`` in the temp dir, paired with a lock file
  ``rlbench-sbx-XXXX.lock`` that its `Sandbox` holds (flock) from before the directory exists
  until after it is gone; a pair whose lock is free is a leftover, removed by the next start.
  As root the directory is a tmpfs of the run's size and file limits (`make_workdir`).
* `remove_leftovers` runs at every Sandbox start; `release` is a Sandbox's close().
* `Capture` keeps a bounded head and tail of the output; `diagnose` names the limit behind an
  exit status or error message.

Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import random
import signal
import tempfile
import time
from pathlib import Path

import envs.sandbox.cgroup as cgroup
from envs.sandbox.files import remove_tree, write_regular
from envs.sandbox.limits import call

UID_BASE, UID_SLOTS = 1_900_000_000, 4096
WORKDIR_PREFIX = "rlbench-sbx-"
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2


class Capture:
    """Keeps the head and the tail of a stream in bounded memory, counting what it drops."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self.limit = 4 * max(max_chars, 16)  # bytes per part: enough for max_chars of UTF-8
        self.head, self.tail = bytearray(), bytearray()
        self.total, self.gap = 0, False  # gap: bytes between head and tail were discarded

    def feed(self, data: bytes) -> None:
        """Add one chunk; memory stays below ~3 * limit however much arrives."""
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.limit:
            del self.tail[: -self.limit]
            self.gap = True

    def text(self) -> tuple[str, bool]:
        """(text, truncated): the whole text, or its start and end around a marker."""
        full = (self.head + (b"" if self.gap else self.tail)).decode("utf-8", "replace")
        if not self.gap and len(full) <= self.max_chars:
            return full, False
        half = self.max_chars // 2
        start = full[:half]
        end = (self.tail.decode("utf-8", "replace") if self.gap else full)[-(self.max_chars - half) :]
        omitted = self.total - len(start.encode()) - len(end.encode())
        return f"{start}\n... [{omitted} bytes of output omitted] ...\n{end}", True


def proc_uid(pid: str) -> int | None:
    """Real uid of a live process from /proc (None if it is gone or a zombie).

    Zombies are skipped: they hold no resources, cannot be killed again, and only wait to
    be reaped by their parent (the harness's event loop for the program itself).
    """
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _kill_if_uid(pid: str, uid: int) -> bool:
    """SIGKILL `pid` if its real uid is `uid`; a pidfd pins it before the uid is re-checked,
    so a pid reused by an unrelated process is never signalled."""
    try:
        fd = os.pidfd_open(int(pid))
    except OSError:
        return False
    try:
        if proc_uid(pid) == uid:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
            return True
    except OSError:
        pass
    finally:
        os.close(fd)
    return False


def kill_uids(wanted) -> int:
    """SIGKILL every process whose real uid is a sandbox uid for which `wanted(uid)` is true.

    Scans /proc instead of using kill(-1) from a process of that uid, so a bug can never turn
    this into a machine-wide kill. Repeats while a fork loop is still producing processes
    (bounded by the process limit). Returns the number of processes killed.
    """
    killed = 0
    for _ in range(50):
        found = 0
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                uid = proc_uid(pid)
                if uid is not None and UID_BASE <= uid < UID_BASE + UID_SLOTS and wanted(uid):
                    found += _kill_if_uid(pid, uid)
        if not found:
            break
        killed += found
        time.sleep(0.01)
    return killed


def kill_uid(uid: int) -> int:
    """SIGKILL every process of the dedicated sandbox `uid` (see `kill_uids`)."""
    if not UID_BASE <= uid < UID_BASE + UID_SLOTS:
        raise ValueError(f"refusing to kill processes of uid {uid}: not a sandbox uid")
    return kill_uids(lambda u: u == uid)


def _lock_dir() -> Path:
    """The root-only directory of the uid slot locks (sandboxed code cannot plant it)."""
    lock_dir = Path("/run" if os.path.isdir("/run") else tempfile.gettempdir()) / "rl-bench-sandbox-uids"
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(lock_dir)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not os.path.isdir(lock_dir):
        raise RuntimeError(f"{lock_dir} is not a private directory of this user")
    return lock_dir


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive flock on `path` (created if missing), or None if held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except BlockingIOError:
        os.close(fd)
        return None


def allocate_uid() -> tuple[int, int]:
    """Reserve a dedicated uid: (uid, fd of the held lock file; closing it frees the uid)."""
    lock_dir = _lock_dir()
    start = random.randrange(UID_SLOTS)
    for i in range(UID_SLOTS):
        slot = (start + i) % UID_SLOTS
        fd = _try_lock(lock_dir / f"{slot}.lock")
        if fd is not None:
            return UID_BASE + slot, fd
    raise RuntimeError("no free sandbox uid")


class FreeSlots:
    """Uid slots that no live Sandbox holds, locked while their leftovers are removed (so no
    new Sandbox can take one meanwhile); `close()` releases them."""

    def __init__(self, own_uid: int | None):
        self.own, self.fds, self.busy = own_uid, {}, set()
        self.lock_dir = _lock_dir()

    def __call__(self, uid: int) -> bool:
        """True if `uid`'s processes and cgroups are leftovers (or this Sandbox's own uid)."""
        if uid == self.own or uid in self.fds:
            return True
        if uid in self.busy or not UID_BASE <= uid < UID_BASE + UID_SLOTS:
            return False
        path = self.lock_dir / f"{uid - UID_BASE}.lock"
        fd = _try_lock(path) if path.exists() else None
        if fd is None:
            self.busy.add(uid)
            return False
        self.fds[uid] = fd
        return True

    def close(self) -> None:
        """Release the locks taken."""
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def make_workdir(size_mb: int | None, max_files: int, uid: int | None) -> tuple[Path, int]:
    """A new owned working directory and the fd of its held lock file.

    `size_mb`: mount a tmpfs of that size and `max_files` inodes on it (root only; None: a
    plain directory), owned by `uid` (None: the caller).
    """
    base = tempfile.gettempdir()
    while True:
        fd, lock_path = tempfile.mkstemp(prefix=WORKDIR_PREFIX, suffix=".lock", dir=base)
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink == 0:  # a cleanup took it for stale before we locked it
            os.close(fd)
            continue
        path = lock_path[: -len(".lock")]
        try:
            os.mkdir(path, 0o700)
            break
        except FileExistsError:  # a directory without its lock file: leave it, try another
            os.unlink(lock_path)
            os.close(fd)
    try:
        if size_mb is not None:
            owner = f",uid={uid},gid={uid}" if uid is not None else ""
            opts = f"size={size_mb}m,nr_inodes={max_files},mode=0700{owner}"
            call("mount", b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode())
    except BaseException:
        remove_workdir(Path(path), fd)
        raise
    return Path(path), fd


def remove_workdir(path: Path, lock_fd: int) -> None:
    """Unmount (if a tmpfs), delete the working directory, then its lock file and lock."""
    if os.path.ismount(path):
        try:
            call("umount2", str(path).encode(), MNT_DETACH)
        except OSError:
            pass
    try:
        remove_tree(path)  # any depth, never follows links
    except OSError:
        pass
    try:
        os.unlink(f"{path}.lock")
    except FileNotFoundError:
        pass
    os.close(lock_fd)


def remove_stale_workdirs() -> int:
    """Remove owned working directories whose lock nobody holds (their harness died)."""
    base, removed, me = tempfile.gettempdir(), 0, os.geteuid()
    try:
        names = [n for n in os.listdir(base) if n.startswith(WORKDIR_PREFIX) and n.endswith(".lock")]
    except OSError:
        return 0
    for name in names:
        lock_path = os.path.join(base, name)
        try:
            if os.lstat(lock_path).st_uid != me:
                continue
            fd = _try_lock(Path(lock_path))
        except OSError:
            continue
        if fd is not None:
            path = Path(lock_path[: -len(".lock")])
            if path.is_symlink() or (path.exists() and path.lstat().st_uid not in (me, *_sandbox_uids(path))):
                os.close(fd)
                continue
            remove_workdir(path, fd)
            removed += 1
    return removed


def _sandbox_uids(path: Path) -> tuple[int, ...]:
    """The owner of `path` if it is a sandbox uid (a root harness's tmpfs workdir)."""
    uid = path.lstat().st_uid
    return (uid,) if UID_BASE <= uid < UID_BASE + UID_SLOTS else ()


def remove_leftovers(own_uid: int | None) -> None:
    """Remove what Sandboxes of killed harnesses left: processes of free uid slots (and of
    `own_uid`), their cgroups, and owned working directories whose lock is free."""
    if own_uid is not None:
        free = FreeSlots(own_uid)
        try:
            kill_uids(free)
            cgroup.remove_stale(lambda slot: free(UID_BASE + slot))
        finally:
            free.close()
    remove_stale_workdirs()


def release(uid: int | None, lock_fd: int | None, own: tuple | None, cgroups) -> None:
    """Kill leftovers, remove cgroups and an owned workdir, then free the uid (also runs at
    garbage collection)."""
    if uid is not None:
        kill_uid(uid)
    if cgroups is not None:
        cgroups.remove()
    if own is not None:
        remove_workdir(*own)
    if lock_fd is not None:
        os.close(lock_fd)


def write_file(workdir: Path, uid: int | None, rel: str, content: str) -> None:
    """Write `content` to `rel` inside `workdir` (owned by `uid`, if one), refusing any path or
    symlink leading out; whatever a run left at `rel` (a FIFO, a link) is replaced, never
    opened (`envs.sandbox.files.write_regular`)."""
    write_regular(workdir, rel, content.encode("utf-8"), uid, replace=True)


def signame(num: int) -> str:
    """'SIGXCPU' for 24; the number itself for unknown signals."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def diagnose(limits, rc: int | None, err: str) -> str | None:
    """Name the limit behind an exit status or error message (None when nothing points to one).

    Signals are exact (SIGXCPU/SIGXFSZ, also as a shell's 128+n); Python and C programs
    report exceeded memory, file size, process and disk limits as errors, recognised by their
    text. A kill by the memory cgroup is read from the cgroup instead (`envs.sandbox.Sandbox._arun`).
    """
    sig = -rc if rc is not None and rc < 0 else (rc - 128 if rc in (152, 153) else 0)
    if sig == signal.SIGXCPU:
        return f"cpu time limit ({limits.cpu_seconds:g} s)"
    if sig == signal.SIGXFSZ:
        return f"file size limit ({limits.max_file_mb} MB)"
    if sig == signal.SIGKILL:  # the kernel's hard cpu limit or the OOM killer
        return f"cpu time ({limits.cpu_seconds:g} s) or memory ({limits.memory_mb} MB) limit"
    if not rc:
        return None
    if any(s in err for s in ("MemoryError", "Cannot allocate memory", "bad_alloc", "out of memory")):
        return f"memory limit ({limits.memory_mb} MB)"
    if "File too large" in err:
        return f"file size limit ({limits.max_file_mb} MB)"
    if "Resource temporarily unavailable" in err and ("fork" in err or "thread" in err.lower()):
        return f"process limit ({limits.max_processes})"
    if "No space left on device" in err:
        return f"disk limit ({limits.disk_mb} MB, {limits.max_files} files)"
    return None
