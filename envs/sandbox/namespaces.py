"""Namespaces and mounts for the sandbox's child helper (`envs.sandbox.child`); child side.

`enter_namespaces` moves the helper into new mount, IPC, pid (for its children) and network
namespaces with one unshare(2); without root, inside a new user namespace that maps only the
harness's own uid and gid and grants the rights for the rest. `private_mounts` then builds the
program's view of the filesystem, invisible outside and gone with the run:

* everything made private first, so nothing propagates back to the host;
* /tmp, /var/tmp and /dev/shm: three directories of ONE new tmpfs of the run's size and inode
  limit (shared budget, in RAM, charged to the run's memory cgroup where there is one);
  emptied with the namespace. Path-based Unix sockets that the host has there are gone;
* /run (and /var/run through its symlink): an empty read-only tmpfs (system sockets such as
  D-Bus's live there), unless the run may use the network (DNS configuration lives there);
* as root with a dedicated uid: each root-only directory above a kept path (e.g. /root above
  an interpreter in /root/.pyenv) is covered by an empty tmpfs (its contents are hidden);
* the directories the harness asks to cover (`Sandbox`'s: this project's source tree, whose
  data files hold the answers of its benchmarks) likewise;
* /dev/mqueue, where mounted: the new IPC namespace's own (empty) message queues;
* kept paths (the interpreter, the working directory) bind-mounted back where a covering
  hid them, from O_PATH descriptors opened before anything was covered.

`mount_proc` (called by the namespace's init) mounts a /proc showing only the sandbox's
processes. Standard library only.
"""

from __future__ import annotations

import os

try:  # a module of the envs.sandbox package in the harness, a top-level module in the child helper
    from .limits import call
except ImportError:
    from limits import call

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x08000000, 0x40000000
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PRIVATE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")  # one private tmpfs, a directory for each
HIDDEN_DIRS = ("/run",)  # covered by an empty read-only tmpfs


def enter_namespaces(mount: bool, pid: bool, net: bool) -> bool:
    """unshare(2) the requested namespaces (mount brings IPC along); True if a user namespace
    was created (non-root: needed for the rights, mapping the caller's uid/gid to themselves).

    The pid namespace applies to children forked afterwards, not to the caller.
    """
    flags = (CLONE_NEWNS | CLONE_NEWIPC if mount else 0) | (CLONE_NEWPID if pid else 0)
    flags |= CLONE_NEWNET if net else 0
    userns = os.geteuid() != 0 and flags != 0
    if not flags:
        return False
    uid, gid = os.geteuid(), os.getegid()
    call("unshare", flags | (CLONE_NEWUSER if userns else 0))
    if userns:  # an unprivileged process may map only its own ids, setgroups denied first
        for name, text in (
            ("uid_map", f"{uid} {uid} 1"),
            ("setgroups", "deny"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    if net:
        loopback_up()
    return userns


def loopback_up() -> None:
    """Bring up `lo` of the new network namespace: programs that talk to themselves over
    localhost (test suites, servers) still work; the host's interfaces are not there."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ifreq = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(sock, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(sock, 0x8914, struct.pack("16sh22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _mount(src: bytes | str, target: str, fstype: bytes | None, flags: int, data: str | None = None) -> None:
    src_b = src.encode() if isinstance(src, str) else src
    call("mount", src_b, target.encode(), fstype, flags, data.encode() if data else None)


def private_tmp(size: int, inodes: int, keep: list[str]) -> list[str]:
    """Give PRIVATE_DIRS (those that exist as real directories and hold no kept path) one new
    tmpfs of `size` bytes and `inodes` files; returns the directories covered.

    The tmpfs is mounted on the first of them, gets a sub-directory per covered directory, and
    each sub-directory is bind-mounted onto its directory; the first is bound onto the tmpfs's
    own mount point last, which hides the other sub-directories from the program.
    """
    dirs = [
        d
        for d in PRIVATE_DIRS
        if os.path.isdir(d) and not os.path.islink(d) and not any(_under(d, k) for k in keep)
    ]
    if not dirs:
        return []
    base = dirs[0]
    _mount(b"tmpfs", base, b"tmpfs", MS_NOSUID | MS_NODEV, f"size={size},nr_inodes={inodes},mode=1777")
    subs = {}
    for d in dirs:
        subs[d] = os.path.join(base, ".sandbox" + d.replace("/", "-"))
        os.mkdir(subs[d])
        os.chmod(subs[d], 0o1777)
    for d in [*dirs[1:], base]:
        _mount(subs[d], d, None, MS_BIND)
    return dirs


def _blockers(keep: list[str], uid: int) -> list[str]:
    """Directories above kept paths that `uid` cannot traverse (private to someone else)."""
    found: list[str] = []
    for path in keep:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            try:
                st = os.stat(ancestor)
            except FileNotFoundError:  # under a covered directory: recreated traversable
                break
            if st.st_uid != uid and not st.st_mode & 0o001:
                if ancestor not in found:
                    found.append(ancestor)
                break
    return found


def private_mounts(
    keep: list[str], uid: int | None, tmp: dict | None, hide: bool = True, cover: list[str] | None = None
) -> None:
    """The program's private view of the filesystem (see the module docstring).

    `keep`: paths that must stay reachable; `uid`: the dedicated uid (None without one);
    `tmp`: {"size": bytes, "inodes": n} for the private /tmp, /var/tmp, /dev/shm (None: keep
    the host's); `hide`: cover HIDDEN_DIRS (not with network access: DNS configuration often
    lives in /run); `cover`: more directories to cover with an empty tmpfs (kept paths inside
    them are bound back). Requires a new mount namespace and the rights in it.
    """
    keep = [p for p in keep if os.path.isdir(p)]
    _mount(b"none", "/", None, MS_REC | MS_PRIVATE)
    umask = os.umask(0o022)  # directories made here must be traversable by the program
    # O_PATH descriptors keep the real directories reachable once their parents are covered.
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep}
    try:
        covered = private_tmp(tmp["size"], tmp["inodes"], keep) if tmp else []
        for d in HIDDEN_DIRS if hide else ():
            if os.path.isdir(d) and not os.path.islink(d) and not any(_under(k, d) for k in keep):
                _mount(
                    b"tmpfs", d, b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755"
                )
        if os.path.ismount("/dev/mqueue"):  # POSIX queues by path: this IPC namespace's own
            try:
                _mount(b"mqueue", "/dev/mqueue", b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError:
                pass  # the host's queue files stay visible (mq_open itself is private)
        for d in [*(_blockers(keep, uid) if uid is not None else []), *(cover or ())]:
            hidden = any(_under(d, c) for c in covered) or d == "/" or d in keep
            if hidden or not os.path.isdir(d) or os.path.islink(d):
                continue  # already covered, or nothing to cover
            _mount(b"tmpfs", d, b"tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64k")
            covered.append(d)
        for path in keep:
            if any(_under(path, c) and path != c for c in covered):
                os.makedirs(path, exist_ok=True)
                _mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
    finally:
        for fd in fds.values():
            os.close(fd)
        os.umask(umask)


def mount_proc() -> None:
    """A /proc of the caller's pid namespace (call as its init): only the sandbox's processes."""
    _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
