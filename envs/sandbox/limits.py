"""Limits and privileges for the sandbox's child helper (`envs.sandbox.child`); child side.

Everything here acts on the calling process and is inherited by what it starts:

* `set_limits`: rlimits (CPU seconds, address space, file size, process count, no cores);
* `drop_privileges`: the dedicated uid/gid, no supplementary groups, irreversibly;
* `tie_to_parent`: the parent-death signal (SIGKILL when the parent dies), re-checked against a
  race with a parent that is already gone;
* `deny_user_namespaces`: a seccomp filter that fails `unshare`/`clone` with CLONE_NEWUSER
  (EPERM) and `clone3` (ENOSYS, so the C library falls back to `clone`, whose flags a filter
  can read), fails `add_key`, `request_key` and `keyctl` (EPERM: the kernel's keyrings are not
  namespaced, and a key in the uid's user or session keyring would outlive the run and reach
  the next user of the uid), and refuses system calls of a foreign ABI (i386, x32), which the
  filter cannot check by number. Needs no-new-privs, which it sets;
* `wait_for_go`: block until the harness has put this process into the run's cgroups.

Standard library only (ctypes for prctl/seccomp); imported by the child at every run, so it
keeps its imports light.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 4, 22, 38
SECCOMP_MODE_FILTER = 2
CLONE_NEWUSER = 0x10000000
# Per architecture: (AUDIT_ARCH_*, unshare, clone, (add_key, request_key, keyctl)); clone3 is 435.
_SECCOMP_ARCHES = {
    "x86_64": (0xC000003E, 272, 56, (248, 249, 250)),
    "aarch64": (0xC00000B7, 97, 220, (217, 218, 219)),
}
_libc = None


def call(name: str, *args) -> int:
    """Call a libc function that returns -1 on error; raise OSError with errno then."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    res = getattr(_libc, name)(*args)
    if res == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return res


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


def set_limits(cfg: dict, exact_nproc: bool) -> None:
    """Apply the resource limits; they are inherited by every process the program starts.

    RLIMIT_NPROC counts the tasks of the real uid. With a dedicated uid (root harness) or
    inside our own user namespace (which counts its tasks separately) that is exactly this
    sandbox (`exact_nproc`); otherwise the uid is shared with the harness, so the limit is set
    above the tasks the user already runs (approximate).
    """
    nproc = cfg["nproc"] if exact_nproc else cfg["nproc"] + count_own_tasks()
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


def tie_to_parent(parent: int | None) -> None:
    """SIGKILL this process when its parent (thread) dies; exit now if it is already gone.

    The kernel clears the setting on a change of uid/gid, so call it again after
    `drop_privileges`. `parent`: the expected parent pid (None: it is outside our pid
    namespace, where getppid() says 0; the caller then checks liveness another way).
    """
    call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent is not None and os.getppid() != parent:
        os._exit(125)


def no_new_privs() -> None:
    """setuid programs (su, sudo, mount) cannot raise privileges again; seccomp needs it."""
    call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def not_dumpable() -> None:
    """No ptrace, no /proc/PID access to this process by the program, although same uid."""
    call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)


class _SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def user_namespace_filter(machine: str) -> list[tuple[int, int, int, int]]:
    """The classic-BPF seccomp program (code, jt, jf, k) that denies new user namespaces and
    the key-management calls (module docstring).

    Jumps are relative (jt/jf instructions are skipped). args[0] is read at offset 16, its low
    32 bits on these little-endian machines; CLONE_NEWUSER is one of those bits.
    """
    audit, nr_unshare, nr_clone, (add_key, request_key, keyctl) = _SECCOMP_ARCHES[machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|..., BPF_RET
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_*
    return [
        (ld, 0, 0, 4),  # 0: A = arch
        (jeq, 1, 0, audit),  # 1: native -> 3
        (ret, 0, 0, eperm),  # 2: foreign ABI (i386 via int 0x80): numbers differ, deny all
        (ld, 0, 0, 0),  # 3: A = syscall number
        (jge, 9, 0, 0x40000000),  # 4: x32 ABI -> 14 (deny)
        (jeq, 10, 0, 435),  # 5: clone3 -> 16 (ENOSYS: libc falls back to clone)
        (jeq, 5, 0, nr_unshare),  # 6: -> 12
        (jeq, 4, 0, nr_clone),  # 7: -> 12
        (jeq, 5, 0, add_key),  # 8: -> 14 (deny)
        (jeq, 4, 0, request_key),  # 9: -> 14
        (jeq, 3, 0, keyctl),  # 10: -> 14
        (ret, 0, 0, allow),  # 11
        (ld, 0, 0, 16),  # 12: A = low 32 bits of flags (args[0])
        (jset, 0, 1, CLONE_NEWUSER),  # 13: set -> 14, else -> 15
        (ret, 0, 0, eperm),  # 14
        (ret, 0, 0, allow),  # 15
        (ret, 0, 0, enosys),  # 16
    ]


def deny_user_namespaces() -> None:
    """Install the seccomp filter of `user_namespace_filter` (inherited, cannot be removed)."""
    machine = os.uname().machine
    if machine not in _SECCOMP_ARCHES:
        raise OSError(f"no seccomp filter for architecture {machine}")
    prog = user_namespace_filter(machine)
    insns = (_SockFilter * len(prog))(*(_SockFilter(*p) for p in prog))
    no_new_privs()
    call("prctl", PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(_SockFprog(len(prog), insns)), 0, 0)


def wait_for_go(fd: int | None) -> None:
    """Wait for the harness's go byte on `fd` (it has moved this process into the run's
    cgroups); EOF means it could not, or died: raise, so the program never starts outside."""
    if fd is None:
        return
    try:
        if os.read(fd, 1) != b"1":
            raise OSError("the harness did not confirm the cgroup move")
    finally:
        os.close(fd)
