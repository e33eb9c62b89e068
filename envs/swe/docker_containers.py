"""The containers of the Docker runtime: isolated, limited, labelled by run, and never left behind.

Every container (`Containers.start`) runs the instance image with
- no network (`network_mode="none"`; pip told not to look for an index, so the eval script's
  reinstall step fails at once instead of retrying: the tests then run against the image's own
  editable install, as they would after a pure-Python patch) unless `ContainerLimits.network`;
- CPU, memory (swap included, so no swap) and process-count limits (`ContainerLimits`);
- labels `rl-bench.run` (the run: `$BENCH_RUN_ID`, else this process), `rl-bench.owner`
  (host:pid:process start time), `rl-bench.instance`, and a name
  `rl-bench.<run>.<instance>.<random>` that says the same in `docker ps`;
- a bounded life: its command is `sleep <lifetime_s>` and Docker removes it when that ends
  (`auto_remove`), so even a SIGKILLed harness leaves nothing running for long.

Removal: `release` removes a container at once (the workspace's `close`); an `atexit` hook
removes whatever this process still has when it exits; a watchdog process
(`envs.swe.docker_watchdog`, spawned by the first start in each process when `watchdog` is on)
removes them within seconds when this process dies without running its exit hooks (SIGKILL);
and the first start of each runtime removes containers whose owner process is gone from this
host (a harness and its watchdog both killed).
"""

from __future__ import annotations

import atexit
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass
from typing import Any

LABEL = "rl-bench"
"""Prefix of the labels (and names) of every container this runtime starts."""
_LIVE: dict[int, Any] = {}  # id(container) -> container, for the exit hook
_LIVE_LOCK = threading.Lock()
_HOOKED: list[bool] = []
_WATCHDOGS: dict[int, subprocess.Popen] = {}  # pid -> its watchdog (held: its stdin is the pipe)
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class ContainerLimits:
    """Resources of one episode or grading container."""

    cpus: float = 2.0
    """CPUs (Docker's `--cpus`)."""
    memory: str = "8g"
    """Memory limit, swap included (Docker's `--memory` = `--memory-swap`)."""
    pids: int = 1024
    """Most processes and threads at once (`--pids-limit`): a fork bomb stops there."""
    network: bool = False
    """Whether the container has a network; off by default (module docstring)."""
    lifetime_s: int = 6 * 3600
    """The container's command sleeps this long; then Docker stops and removes it."""


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (/proc), "" where unknown."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
        return stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def owner_label(pid: int | None = None) -> str:
    """`host:pid:start` of a process (this one by default): tells a dead owner from a reused pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def owner_alive(owner: str) -> bool:
    """Whether the process named by an owner label still runs; True for other hosts (unknown)."""
    host, _, rest = owner.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    return not start or _start_ticks(int(pid)) == start


def run_label() -> str:
    """The run a container belongs to: `$BENCH_RUN_ID` (set by the runner), else `pid<N>`."""
    raw = os.environ.get("BENCH_RUN_ID") or f"pid{os.getpid()}"
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)[:64].strip("-.") or "run"


def _ignorable(exc: Exception) -> bool:
    """A removal error that means the container is gone or going (404, 409 in progress)."""
    return getattr(exc, "status_code", None) in (404, 409) or type(exc).__name__ == "NotFound"


def remove(container: Any) -> None:
    """Remove a container now (killing it), ignoring one that is already gone."""
    with _LIVE_LOCK:
        _LIVE.pop(id(container), None)
    try:
        container.remove(force=True)
    except Exception as exc:  # docker.errors.NotFound / APIError 409 (auto-removal under way)
        if not _ignorable(exc):
            raise


def remove_live() -> None:
    """The exit hook: remove every container this process started and still holds."""
    with _LIVE_LOCK:
        live = list(_LIVE.values())
    for container in live:
        try:
            remove(container)
        except Exception:  # at exit: best effort, the lifetime bound covers the rest
            pass


def start_watchdog() -> subprocess.Popen:
    """This process's watchdog (`envs.swe.docker_watchdog`), spawned on the first call."""
    with _LIVE_LOCK:
        if os.getpid() not in _WATCHDOGS:
            path = os.pathsep.join(p for p in (_PROJECT_ROOT, os.environ.get("PYTHONPATH")) if p)
            _WATCHDOGS[os.getpid()] = subprocess.Popen(
                [sys.executable, "-m", "envs.swe.docker_watchdog", owner_label()],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONPATH": path},
            )
        return _WATCHDOGS[os.getpid()]


class Containers:
    """Starts a runtime's containers (module docstring) and removes its dead owners' leftovers."""

    def __init__(self, limits: ContainerLimits | None = None, run: str | None = None, watchdog: bool = False):
        """`limits`: resources of each container; `run`: the run label (default `run_label()` at
        each start: the runner names the run after the task, and so its runtime, is built);
        `watchdog`: spawn the watchdog on the first start (for a real daemon; tests of the
        arguments pass a fake client and leave it off)."""
        self.limits, self._run, self.watchdog = limits or ContainerLimits(), run, watchdog
        self._reaped: set[int] = set()

    @property
    def run(self) -> str:
        """The run label of the next container."""
        return self._run or run_label()

    def run_kwargs(self, image: str, instance_id: str, workdir: str) -> dict[str, Any]:
        """The keyword arguments of `client.containers.run` for one container."""
        lim, run = self.limits, self.run
        name = f"{LABEL}.{run}.{re.sub(r'[^a-z0-9_.-]', '-', instance_id.lower())}.{uuid.uuid4().hex[:8]}"
        kwargs: dict[str, Any] = {
            "image": image,
            "command": ["sleep", str(int(lim.lifetime_s))],
            "detach": True,
            "auto_remove": True,
            "working_dir": workdir,
            "name": name,
            "labels": {
                f"{LABEL}.run": run,
                f"{LABEL}.owner": owner_label(),
                f"{LABEL}.instance": instance_id,
            },
            "nano_cpus": int(lim.cpus * 1e9),
            "mem_limit": lim.memory,
            "memswap_limit": lim.memory,
            "pids_limit": int(lim.pids),
        }
        if not lim.network:
            kwargs["network_mode"] = "none"
            kwargs["environment"] = {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        return kwargs

    def reap(self, client: Any) -> list[str]:
        """Remove (once per client) containers of this runtime's label whose owner process is gone
        from this host; returns their names."""
        if id(client) in self._reaped:
            return []
        self._reaped.add(id(client))
        removed = []
        for container in client.containers.list(
            all=True, filters={"label": f"{LABEL}.owner"}, ignore_removed=True
        ):
            owner = (getattr(container, "labels", None) or {}).get(f"{LABEL}.owner", "")
            if owner and not owner_alive(owner):
                remove(container)
                removed.append(container.name)
        return removed

    def start(self, client: Any, image: str, instance_id: str, workdir: str) -> Any:
        """Start one container (leftovers of dead harnesses removed first) and track it for exit."""
        self.reap(client)
        if self.watchdog:
            start_watchdog()
        container = client.containers.run(**self.run_kwargs(image, instance_id, workdir))
        with _LIVE_LOCK:
            _LIVE[id(container)] = container
            if not _HOOKED:
                atexit.register(remove_live)
                _HOOKED.append(True)
        return container
