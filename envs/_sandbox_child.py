"""Child side of `envs.sandbox`: set up isolation inside the fresh child process, then exec.

Started by the parent as ``python -I -S _sandbox_child.py CONFIG_JSON PROGRAM ARGS...`` in its
own session, with a minimal environment and the working directory as cwd. It runs with the
harness's privileges (usually root) only for the setup steps below, then drops them. With a
pid namespace it forks a tiny init (pid 1 of the namespace, reaping orphans) that forks the
program; when the program ends, init exits and the kernel kills whatever the program left
behind, wherever it moved (setsid, double fork). Without one it simply execs the program.
Doing the setup in a separate small interpreter instead of a ``preexec_fn`` keeps the harness
safe to use from threads (``preexec_fn`` may deadlock in a multi-threaded parent) and leaves
the parent untouched: every namespace and limit applies only to this child and descendants.

Order matters: namespaces and mounts need root, so they come before dropping to the
unprivileged uid; rlimits come before the fork/exec so the program starts with them.
``--probe`` prints, as JSON, which of these steps work on this machine (`capabilities()`).
Standard library only.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x40000000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
SETUP_FAILED = 125  # exit status when the sandbox itself could not be set up
# Dedicated uids come from a high range no distribution hands out; a lock file per slot keeps
# them unique across all harness processes on the machine (so limits and cleanup never mix).
_UID_BASE, _UID_SLOTS = 1_900_000_000, 4096
_libc = None
_own_userns = False  # set once this process created a user namespace (non-root only)


def _call(name: str, *args) -> None:
    """Call a libc function that returns 0 on success; raise OSError with errno otherwise."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """unshare(2); without root, inside a new user namespace (once), which grants the rights."""
    global _own_userns
    if os.geteuid() != 0 and not _own_userns:
        flags |= CLONE_NEWUSER
    _call("unshare", flags)
    _own_userns = _own_userns or bool(flags & CLONE_NEWUSER)


def new_network_namespace() -> None:
    """Move into a new, empty network namespace with only a loopback device, brought up.

    The host's interfaces (and its 127.0.0.1) are not reachable from it; bringing `lo` up lets
    programs that talk to themselves over localhost (test suites, servers) still work.
    """
    unshare(CLONE_NEWNET)
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(sock, 0x8914, struct.pack("16sh22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def expose_paths(keep: list[str], uid: int) -> None:
    """Let `uid` reach the paths in `keep` even when a parent directory is private to root.

    Example: the interpreter lives in /root/.pyenv and /root is 0700, so an unprivileged uid
    could not start Python. In a private mount namespace, each such blocking directory is
    covered by an empty read-only-for-others tmpfs, and the kept paths are bind-mounted back
    at their own location. Side effect (wanted): the rest of that directory (e.g. all of
    /root) is hidden from the program. Nothing changes outside this child's namespace.
    """
    blockers: dict[str, list[str]] = {}
    for path in keep:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            st = os.stat(ancestor)
            if st.st_uid != uid and not st.st_mode & 0o001:
                blockers.setdefault(ancestor, []).append(path)
                break
    if not blockers:
        return
    _call("unshare", CLONE_NEWNS)
    # Make every mount private first so nothing below can propagate back to the host.
    _call("mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)
    # O_PATH descriptors keep the real directories reachable once their parent is covered.
    fds = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for paths in blockers.values() for path in paths}
    for ancestor, paths in blockers.items():
        _call("mount", b"tmpfs", ancestor.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=755,size=64k")
        for path in paths:
            os.makedirs(path, exist_ok=True)
            _call("mount", f"/proc/self/fd/{fds[path]}".encode(), path.encode(), None, MS_BIND | MS_REC, None)
    for fd in fds.values():
        os.close(fd)


def count_own_tasks() -> int:
    """Number of tasks (processes and threads) of this real uid: what RLIMIT_NPROC counts."""
    uid, total = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    total += len(os.listdir(f"/proc/{name}/task"))
            except OSError:  # the process exited meanwhile
                pass
    return total


def set_limits(cfg: dict) -> None:
    """Apply the resource limits; they are inherited by every process the program starts.

    RLIMIT_NPROC counts the tasks of the real uid. With a dedicated uid (root harness) or
    inside our own user namespace (which counts its tasks separately) that is exactly this
    sandbox; otherwise the uid is shared with the harness, so the limit is set above the
    tasks the user already runs (approximate).
    """
    exact = cfg.get("uid") is not None or os.geteuid() == 0 or _own_userns
    nproc = cfg["nproc"] if exact else cfg["nproc"] + count_own_tasks()
    for which, value, hard in (
        (resource.RLIMIT_CPU, cfg["cpu"], cfg["cpu"] + 1),  # SIGXCPU at soft, SIGKILL at hard
        (resource.RLIMIT_AS, cfg["as"], cfg["as"]),
        (resource.RLIMIT_FSIZE, cfg["fsize"], cfg["fsize"]),
        (resource.RLIMIT_NPROC, nproc, nproc),
        (resource.RLIMIT_CORE, 0, 0),  # no core dumps filling the working directory
    ):
        resource.setrlimit(which, (value, hard))


def drop_privileges(uid: int, gid: int) -> None:
    """Become `uid`/`gid` with no supplementary groups, irreversibly (real, effective, saved)."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("the uid did not change")


def setup(cfg: dict) -> None:
    """All isolation steps for one run, in the order they require."""
    # Python ignores SIGPIPE and SIGXFSZ and ignored signals survive exec: restore the
    # defaults so that e.g. `dd` is stopped by SIGXFSZ at the file size limit.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    if cfg.get("netns"):
        new_network_namespace()
    if cfg.get("pidns"):  # applies to the children forked after this, not to this process
        unshare(CLONE_NEWPID)
    uid = cfg.get("uid")
    if uid is not None:
        expose_paths(cfg.get("keep", []), uid)
    set_limits(cfg)
    try:  # setuid programs (su, sudo, mount) cannot raise privileges again
        _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    except OSError:
        pass
    if uid is not None:
        drop_privileges(uid, cfg["gid"])


# ---- Parent-side helpers for envs.sandbox (their extra imports are lazy: the child starts fast).


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


def kill_uid(uid: int) -> int:
    """SIGKILL every process whose real uid is the dedicated sandbox `uid`; returns the count.

    Scans /proc instead of using kill(-1) from a process of that uid, so a bug can never turn
    this into a machine-wide kill. A pidfd pins each process before its uid is re-checked, so
    a pid reused by an unrelated process is never signalled. Repeats while a fork loop is
    still producing processes (bounded by the process limit).
    """
    if uid < _UID_BASE:
        raise ValueError(f"refusing to kill processes of uid {uid}: not a sandbox uid")
    import time

    killed = 0
    for _ in range(50):
        found = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or proc_uid(pid) != uid:
                continue
            try:
                fd = os.pidfd_open(int(pid))
            except OSError:
                continue
            try:
                if proc_uid(pid) == uid:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    found += 1
            except OSError:
                pass
            finally:
                os.close(fd)
        if not found:
            break
        killed += found
        time.sleep(0.01)
    return killed


def allocate_uid() -> tuple[int, int]:
    """Reserve a dedicated uid: (uid, fd of the held lock file; closing it frees the uid)."""
    import fcntl
    import random
    import tempfile
    from pathlib import Path

    # /run is root-only, so sandboxed code cannot plant the lock directory in advance.
    lock_dir = Path("/run" if os.path.isdir("/run") else tempfile.gettempdir()) / "rl-bench-sandbox-uids"
    lock_dir.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(lock_dir)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not os.path.isdir(lock_dir):
        raise RuntimeError(f"{lock_dir} is not a private directory of this user")
    start = random.randrange(_UID_SLOTS)
    for i in range(_UID_SLOTS):
        slot = (start + i) % _UID_SLOTS
        fd = os.open(lock_dir / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return _UID_BASE + slot, fd
        except BlockingIOError:
            os.close(fd)
    raise RuntimeError("no free sandbox uid")


def _exec(argv: list[str]):
    """Replace this process with the program (exit like a shell: 127 not found, 126 other)."""
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def supervise(argv: list[str]):
    """Fork init (pid 1 of the new pid namespace), which forks and reaps the program.

    The program is not pid 1 itself because pid 1 ignores default-action signals (SIGXCPU,
    SIGXFSZ, SIGINT, ...) and must reap orphans. The program's exact wait status travels back
    through a pipe, and this process ends the same way (same exit code or same signal).
    """
    r, w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(r)
        program = os.fork()
        if program == 0:
            os.close(w)
            _exec(argv)
        while True:  # reap everything; stop when the program itself has ended
            pid, status = os.wait()
            if pid == program:
                os.write(w, str(status).encode())
                os._exit(0)  # the kernel now kills the rest of the namespace
    os.close(w)
    for fd in (0, 1, 2):  # keep no copy of the pipes: EOF must come when the program ends
        os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    data = os.read(r, 32)
    _, init_status = os.waitpid(init, 0)
    status = int(data) if data else init_status  # no data: init itself was killed
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _try(step) -> bool:
    """Run `step` in a forked child (so this process stays clean); True if it exited 0."""
    pid = os.fork()
    if pid == 0:
        try:
            step()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def probe(cfg: dict) -> dict[str, bool]:
    """Which isolation mechanisms work here; each is tried in its own throwaway child."""
    uid, gid, python = cfg["uid"], cfg["gid"], cfg["python"]
    root = os.geteuid() == 0

    def unprivileged():
        expose_paths(cfg["keep"], uid)
        drop_privileges(uid, gid)
        if not os.access(python, os.X_OK) or not os.access(os.__file__, os.R_OK):
            raise OSError("the interpreter is not reachable by the unprivileged uid")

    def mounts():
        _call("unshare", CLONE_NEWNS)
        _call("mount", b"none", b"/", None, MS_REC | MS_PRIVATE, None)

    def pid_namespace():
        unshare(CLONE_NEWPID)
        if not _try(lambda: None if os.getpid() == 1 else os._exit(1)):
            raise OSError("not pid 1 in the new namespace")

    def parent_protected():
        unprivileged()
        try:
            os.kill(os.getppid(), 0)  # signal 0: only checks permission, sends nothing
        except PermissionError:
            return
        raise OSError("can signal the parent")

    return {
        "rlimits": True,
        "network_namespace": _try(new_network_namespace),
        "mount_namespace": root and _try(mounts),
        "unprivileged_uid": root and _try(unprivileged),
        "pid_namespace": _try(pid_namespace),
        "parent_kill_protection": root and _try(parent_protected),
        "no_new_privs": _try(lambda: _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
    }


def main() -> None:
    """Entry point: probe, or set up and run the program (exit 125 if setup fails)."""
    cfg = json.loads(sys.argv[1])
    if cfg.get("probe"):
        print(json.dumps(probe(cfg)))
        return
    argv = sys.argv[2:]
    try:
        setup(cfg)
    except Exception as exc:  # report, never run the program half-isolated
        os.write(2, f"sandbox setup failed: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    if cfg.get("pidns"):
        supervise(argv)
    _exec(argv)


if __name__ == "__main__":
    main()
