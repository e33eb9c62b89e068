"""Cgroups of `envs.sandbox` (harness side): total memory and task count of a Sandbox's runs.

rlimits apply per process: four processes of 400 MB each pass a 512 MB RLIMIT_AS. A memory
cgroup bounds their sum, and the pages of the private tmpfs they write, which are charged to it;
a pids cgroup bounds processes and threads in total (a second bound beside RLIMIT_NPROC).

Where: under the harness's own cgroup of each hierarchy (from /proc/self/cgroup and
/proc/self/mountinfo): cgroup v1 `memory` and `pids` hierarchies, or cgroup v2 where the
harness's cgroup lists the controller in its cgroup.subtree_control (v2 forbids processes in a
cgroup that hands controllers down, so that is a delegated, process-free cgroup or the root).
It needs write access there, in practice root. One cgroup per Sandbox, named after its uid
slot (``rl-bench-sbx-<slot>``), made with the Sandbox and removed by close(); the harness
moves each run's child helper into it before the helper starts anything (`attach`). A killed harness's cgroups (slot lock free) are removed by
the next start (`remove_stale`). Standard library only.
"""

from __future__ import annotations

import functools
import os
import signal
import time

CONTROLLERS = ("memory", "pids")
NAME_PREFIX = "rl-bench-sbx-"


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, value: object) -> None:
    with open(path, "w") as f:
        f.write(str(value))


@functools.lru_cache(maxsize=1)
def parents() -> tuple[tuple[str, str, int], ...]:
    """(controller, this process's cgroup directory, version) for each usable controller."""
    try:
        return _parents()
    except (OSError, ValueError, IndexError):  # no /proc, or a format this does not know
        return ()


def _parents() -> tuple[tuple[str, str, int], ...]:
    v1: dict[str, str] = {}
    v2 = None
    for line in _read("/proc/self/cgroup").splitlines():
        hid, ctrls, path = line.split(":", 2)
        if hid == "0":
            v2 = path
        for c in ctrls.split(","):
            v1[c] = path
    found: dict[str, tuple[str, int]] = {}
    for line in _read("/proc/self/mountinfo").splitlines():
        fields = line.split()
        sep = fields.index("-")
        root, mnt, fstype, opts = fields[3], fields[4], fields[sep + 1], fields[sep + 3]
        if fstype not in ("cgroup", "cgroup2"):
            continue
        for c in CONTROLLERS:
            if fstype == "cgroup" and c not in opts.split(","):
                continue
            path = v1.get(c) if fstype == "cgroup" else v2
            if c in found or path is None or not path.startswith(root):
                continue
            d = os.path.normpath(mnt + "/" + path[len(root) :])
            if fstype == "cgroup2":
                try:
                    if c not in _read(f"{d}/cgroup.subtree_control").split():
                        continue
                except OSError:
                    continue
            found[c] = (d, 1 if fstype == "cgroup" else 2)
    return tuple((c, d, v) for c, (d, v) in found.items() if os.access(d, os.W_OK))


class Cgroups:
    """The cgroups of one Sandbox: `procs_files` for the child to join, `oom_kills`, `remove`."""

    def __init__(self, dirs: list[tuple[str, int]]):
        self.dirs = dirs  # (directory, version); with v2 one directory serves both controllers

    @classmethod
    def create(cls, name: str, memory_bytes: int, tasks: int) -> Cgroups | None:
        """Make the cgroups `name` with their limits; None where no controller is usable."""
        made: dict[str, int] = {}
        try:
            for controller, parent, version in parents():
                d = os.path.join(parent, name)
                if d not in made:
                    _remove(d)  # a leftover of the same name
                    os.mkdir(d)
                    made[d] = version
                if controller == "memory":
                    _write(f"{d}/{'memory.limit_in_bytes' if version == 1 else 'memory.max'}", memory_bytes)
                    swap = "memory.memsw.limit_in_bytes" if version == 1 else "memory.swap.max"
                    try:  # no swapping past the limit (absent without swap accounting)
                        _write(f"{d}/{swap}", memory_bytes if version == 1 else 0)
                    except OSError:
                        pass
                else:
                    _write(f"{d}/pids.max", tasks)
        except OSError:
            for d in made:
                _remove(d)
            return None
        return cls(list(made.items())) if made else None

    def attach(self, pid: int) -> None:
        """Move process `pid` (not yet forked: the child helper) into the cgroups."""
        for d, _ in self.dirs:
            _write(f"{d}/cgroup.procs", pid)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for exceeding the memory limit so far."""
        for d, version in self.dirs:
            try:
                text = _read(f"{d}/{'memory.oom_control' if version == 1 else 'memory.events'}")
            except FileNotFoundError:
                continue
            for line in text.splitlines():
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
        return 0

    def remove(self) -> None:
        """Kill whatever is left inside, then delete the cgroups."""
        for d, _ in self.dirs:
            _remove(d)


def _remove(d: str) -> None:
    """SIGKILL the processes in cgroup directory `d` and remove it (retrying while they die)."""
    for _ in range(200):
        try:
            pids = _read(f"{d}/cgroup.procs").split()
        except FileNotFoundError:
            return
        except OSError:
            pids = []
        for pid in pids:
            try:
                fd = os.pidfd_open(int(pid))
            except OSError:
                continue
            try:  # still inside (not a reused pid): signal through the pinned pidfd
                if pid in _read(f"{d}/cgroup.procs").split():
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except OSError:
                pass
            finally:
                os.close(fd)
        try:
            os.rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY while killed processes exit
            time.sleep(0.01)


def remove_stale(is_leftover) -> int:
    """Remove this harness cgroup's ``rl-bench-sbx-<slot>`` children for which
    `is_leftover(slot)` is true (their Sandbox is gone); returns how many."""
    removed = 0
    for _, parent, _ in parents():
        try:
            names = [n for n in os.listdir(parent) if n.startswith(NAME_PREFIX)]
        except OSError:
            continue
        for name in names:
            suffix = name[len(NAME_PREFIX) :]
            if suffix.isdigit() and is_leftover(int(suffix)):
                _remove(os.path.join(parent, name))
                removed += 1
    return removed
