"""What isolation this machine provides, for `envs.sandbox.Sandbox.capabilities()`.

The child helper (`envs.sandbox.child`, ``probe``) tries each namespace, mount, privilege and
seccomp step in a throwaway child; this side adds what only the harness can try (a cgroup of
its own, a tmpfs working directory) and the derived guarantees. Run once per process.
Standard library only.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import envs.sandbox.cgroup as cgroup
from envs.sandbox.host import make_workdir, remove_workdir

CHILD = Path(__file__).with_name("child.py")
PROJECT_TREE = str(Path(__file__).resolve().parents[2])
"""The source tree this harness runs from (its data files hold the answers of the benchmarks)."""
ANSWER_DIRS = (str(Path(__file__).resolve().parents[1] / "swe" / "mini"),)
"""Data directories of the package itself that hold answers (the SWE datasets' test patches):
covered even where the package is installed inside the interpreter's prefix."""
SYSTEM_DIRS = frozenset(
    {
        "bin",
        "boot",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "proc",
        "run",
        "sbin",
        "sys",
        "tmp",
        "usr",
        "var",
    }
)
"""Top-level directories a run sees as they are (the rest are covered, see `default_cover`)."""
_PRIVATE = ("/tmp", "/var/tmp", "/dev/shm")  # envs.sandbox.namespaces.PRIVATE_DIRS: a tmpfs per run
# Imports the helper as a module (so its bytecode is cached), appended: the stdlib comes first.
_BOOT = f"import sys; sys.path.append({str(CHILD.parent)!r}); import child; child.main()"
PATH = "/usr/local/bin:/usr/bin:/bin"
_CHILD_KEYS = (
    "network_namespace",
    "mount_namespace",
    "private_tmp",
    "pid_namespace",
    "private_proc",
    "unprivileged_uid",
    "parent_kill_protection",
    "no_new_privs",
    "user_namespaces_denied",
    "parent_death_signal",
)


def child_command(cfg: dict, argv: list[str]) -> list[str]:
    """The command line of the child helper with config `cfg`, running `argv`."""
    return [sys.executable, "-I", "-S", "-c", _BOOT, json.dumps(cfg), *argv]


def keep_paths(workdir: Path | None = None) -> list[str]:
    """Paths the sandboxed program must reach: the interpreter's prefixes and the workdir."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return sorted({os.path.realpath(p) for p in paths} | ({str(workdir)} if workdir else set()))


@functools.lru_cache(maxsize=1)
def _world_writable() -> tuple[str, ...]:
    """World-writable directories under /etc, /var and /run besides the private ones: what a run
    writes there would outlive it (/usr is left out: nothing writable lives there)."""
    found, stack = [], ["/etc", "/var", "/run"]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.stat(follow_symlinks=False).st_mode & 0o002 and entry.path not in _PRIVATE:
                    found.append(entry.path)
                stack.append(entry.path)
    return tuple(sorted(found))


def default_cover() -> list[str]:
    """What a run does not see by default: every top-level directory outside SYSTEM_DIRS (home
    directories, other checkouts, data and caches), this project's source tree (unless it is
    installed inside the interpreter's prefix: then ANSWER_DIRS alone) and the world-writable
    directories of the system's (`_world_writable`); the kept paths inside them (the
    interpreter, the working directory) stay reachable."""
    tops = [f"/{n}" for n in sorted(os.listdir("/")) if n not in SYSTEM_DIRS]
    tops = [p for p in tops if os.path.isdir(p) and not os.path.islink(p)]
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    installed = any(PROJECT_TREE == p or PROJECT_TREE.startswith(p + "/") for p in prefixes)
    project = [] if installed else [PROJECT_TREE]  # installed: its site-packages hold the packages
    return [*tops, *project, *ANSWER_DIRS, *_world_writable()]


def _can_mount_workdir() -> bool:
    """Root can mount a tmpfs working directory (and remove it again)."""
    if os.geteuid() != 0:
        return False
    try:
        path, fd = make_workdir(1, 16, None)
    except OSError:
        return False
    mounted = os.path.ismount(path)
    remove_workdir(path, fd)
    return mounted


def _cgroup_controllers() -> set[str]:
    """Controllers under which a cgroup can really be made and removed here."""
    found = {c for c, _, _ in cgroup.parents()}
    if not found:
        return set()
    probe = cgroup.Cgroups.create(f"{cgroup.NAME_PREFIX}probe-{os.getpid()}", 64 << 20, 16)
    if probe is None:
        return set()
    probe.remove()
    return found


@functools.lru_cache(maxsize=1)
def probe() -> dict[str, bool]:
    """Every capability as a bool (see `Sandbox.capabilities()`); cached per process."""
    cfg = {"probe": True, "uid": 65534, "gid": 65534, "python": sys.executable, "keep": keep_paths()}
    try:
        done = subprocess.run(
            child_command(cfg, []), capture_output=True, text=True, timeout=60, env={"PATH": PATH}
        )
        caps = json.loads(done.stdout)
    except (OSError, ValueError, subprocess.SubprocessError):
        caps = {"rlimits": True}
    for key in _CHILD_KEYS:
        caps.setdefault(key, False)
    root = os.geteuid() == 0
    # As root, RLIMIT_NPROC only works under a non-root uid; as a user it is enforced (approximately).
    caps["process_limit"] = caps["unprivileged_uid"] or not root
    caps["file_isolation"] = caps["unprivileged_uid"]  # permission-based, see envs.sandbox
    # A pid namespace hides every outside process from kill(); its end kills all inside it.
    caps["parent_kill_protection"] = caps["parent_kill_protection"] or caps["pid_namespace"]
    caps["kill_escaped_processes"] = caps["unprivileged_uid"] or caps["pid_namespace"]
    # The private mounts and /proc need the mount namespace the run is given.
    caps["private_tmp"] = caps["private_tmp"] and caps["mount_namespace"]
    caps["private_proc"] = caps["private_proc"] and caps["mount_namespace"] and caps["pid_namespace"]
    # Everything dies with the harness only through init's death (the helper's is not enough).
    caps["parent_death_kill"] = caps["parent_death_signal"] and caps["pid_namespace"]
    controllers = _cgroup_controllers() if caps["unprivileged_uid"] else set()
    caps["memory_total_limit"] = "memory" in controllers  # cgroups are named by uid slot
    caps["process_total_limit"] = "pids" in controllers
    caps["workdir_size_limit"] = _can_mount_workdir()
    return caps
