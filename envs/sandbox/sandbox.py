"""The `Sandbox` and its types: one run of a program at a time, under `SandboxLimits`.

`Sandbox` owns the run's uid slot, working directory and cgroups (`envs.sandbox.host`,
`envs.sandbox.cgroup`), starts the child helper (`envs.sandbox.child`) for each run, enforces the
wall and output limits from the harness and turns what happened into a `SandboxResult`. What the
sandbox contains on each kind of machine is the package docstring (`envs.sandbox`). Standard
library only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
import signal
import subprocess
import sys
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import envs.sandbox.cgroup as cgroup
from envs.sandbox.files import walk
from envs.sandbox.host import (
    UID_BASE,
    Capture,
    allocate_uid,
    diagnose,
    kill_uid,
    make_workdir,
    release,
    remove_leftovers,
    signame,
    write_file,
)
from envs.sandbox.probe import child_command, default_cover, keep_paths, probe

_FLOOD_FACTOR = 100  # a program printing 100x max_output_chars is killed instead of drained
_PATH = "/usr/local/bin:/usr/bin:/bin"
_WALL_GRACE = 2  # init's own wall alarm: this many seconds after the harness's limit


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run. `network=False` asks for a network namespace (if available).

    `memory_mb` bounds each process's address space and, with a memory cgroup, all processes
    together, files they keep in RAM included (a tmpfs workdir's too); `disk_mb` and
    `max_files` bound the private /tmp, /var/tmp and /dev/shm together and, as root, an owned
    working directory.
    """

    cpu_seconds: float = 10.0
    wall_seconds: float = 20.0
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 64
    max_output_chars: int = 8000
    network: bool = False
    disk_mb: int = 512
    max_files: int = 10_000


@dataclass
class SandboxResult:
    """Outcome of one run; `killed_reason` names the limit that stopped or cut the program."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    killed_reason: str | None
    seconds: float
    truncated: bool

    def as_observation(self) -> str:
        """Short text for the agent: stdout, stderr, exit status and which limit was hit."""
        parts = [self.stdout.rstrip("\n")] if self.stdout.strip() else []
        if self.stderr.strip():
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        killed = self.timed_out or (self.killed_reason or "").startswith("output limit")
        rc = self.returncode
        if rc and not killed:
            parts.append(f"[killed by signal {signame(-rc)}]" if rc < 0 else f"[exit code {rc}]")
        reason = self.killed_reason
        if reason and reason.startswith("output truncated"):
            parts.append(f"[sandbox: {reason}]")
        elif reason:
            parts.append(f"[sandbox: {reason} exceeded" + ("; the program was killed]" if killed else "]"))
        return "\n".join(parts) if parts else "(no output)"


class Sandbox:
    """Runs untrusted programs under `limits` in `workdir`, one run at a time.

    With `workdir=None` a private temporary directory is created (as root: a tmpfs of
    `disk_mb`) and removed by `close()`. A given `workdir` is kept, but as root it is chowned
    (recursively) to the sandbox uid so the program can write there. For concurrency use one
    Sandbox per episode. Creating one also removes what Sandboxes of killed harnesses left.
    With a mount namespace, the directories in `cover` (default: `default_cover()`) look empty
    to the program, except the kept paths inside them (the interpreter, the working directory).
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),
        workdir: Path | None = None,
        cover: list[str] | None = None,
    ):
        self.limits = limits
        self.cover = [str(Path(p).resolve()) for p in (default_cover() if cover is None else cover)]
        self._caps = self.capabilities()
        self._uid = self._lock_fd = self._cgroups = own = None
        if self._caps["unprivileged_uid"]:
            self._uid, self._lock_fd = allocate_uid()
        try:
            remove_leftovers(self._uid)
            if workdir is None:
                size = limits.disk_mb if self._caps["workdir_size_limit"] else None
                own = make_workdir(size, limits.max_files, self._uid)
            self.workdir = (own[0] if own else Path(workdir)).resolve()
            self.workdir.mkdir(parents=True, exist_ok=True)
            if self._uid is not None:
                os.chown(self.workdir, self._uid, self._uid)
                for rel, _ in walk(self.workdir):
                    os.chown(self.workdir / rel, self._uid, self._uid, follow_symlinks=False)
                if self._caps["memory_total_limit"] or self._caps["process_total_limit"]:
                    name = f"{cgroup.NAME_PREFIX}{self._uid - UID_BASE}"
                    self._cgroups = cgroup.Cgroups.create(name, limits.memory_mb << 20, limits.max_processes)
        except BaseException:
            release(self._uid, self._lock_fd, own, self._cgroups)
            raise
        self._oom_kills = self._cgroups.oom_kills() if self._cgroups else 0
        self._busy = False
        self._finalizer = weakref.finalize(self, release, self._uid, self._lock_fd, own, self._cgroups)

    @staticmethod
    def capabilities() -> dict[str, bool]:
        """Which isolation this machine provides (probed once per process, then cached).

        Keys: rlimits, network_namespace, mount_namespace, pid_namespace, unprivileged_uid,
        no_new_privs, process_limit, file_isolation, parent_kill_protection,
        kill_escaped_processes, and for the guarantees of the module docstring: private_tmp
        (/tmp, /var/tmp, /dev/shm private and size-limited), private_proc (/proc shows only the
        sandbox), user_namespaces_denied (seccomp), parent_death_signal, parent_death_kill
        (a killed harness takes every process of the run with it), memory_total_limit and
        process_total_limit (cgroups), workdir_size_limit (owned workdir is a tmpfs).
        """
        return dict(probe())

    def close(self) -> None:
        """Kill leftovers, delete the owned workdir and the cgroups, free the uid. Idempotent."""
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _command(self, argv: list[str], go_fd: int | None = None) -> list[str]:
        """The child-helper command line that sets up isolation and then execs `argv`
        (`go_fd`: the pipe on which it waits until the harness has put it in the cgroups)."""
        lim, caps = self.limits, self._caps
        cpu = max(1, math.ceil(lim.cpu_seconds))
        cfg = {
            "cpu": cpu,
            "as": lim.memory_mb << 20,
            "fsize": lim.max_file_mb << 20,
            "nproc": lim.max_processes,
            "uid": self._uid,
            "gid": self._uid,
            "keep": keep_paths(self.workdir),
            "netns": not lim.network and caps["network_namespace"],
            "pidns": caps["pid_namespace"],
            "mountns": caps["mount_namespace"],
            "tmp": {"size": lim.disk_mb << 20, "inodes": lim.max_files} if caps["private_tmp"] else None,
            "hide_run": not lim.network,
            "cover": self.cover,
            "proc": caps["private_proc"],
            "seccomp": caps["user_namespaces_denied"],
            "go_fd": go_fd,
            "parent": os.getpid(),
            "wall": math.ceil(lim.wall_seconds) + _WALL_GRACE,
        }
        return child_command(cfg, argv)

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        """Minimal environment: nothing of the host's passes through (no secrets, no proxies)."""
        env = {
            "PATH": f"{os.path.dirname(sys.executable)}:{_PATH}",  # `python` = the harness's
            "HOME": str(self.workdir),
            "TMPDIR": str(self.workdir),  # keep temp files private and removed with the workdir
            "LANG": "C.UTF-8",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
        }
        return {**env, **(extra or {})}

    def _kill_all(self, pid: int) -> None:
        """SIGKILL the program's process group (its pid namespace's init with it, hence all in
        that namespace) and, with a dedicated uid, every process of that uid."""
        try:
            os.killpg(pid, signal.SIGKILL)  # session leader: its pgid is its pid
        except (ProcessLookupError, PermissionError):
            pass
        if self._uid is not None:
            kill_uid(self._uid)

    async def arun(
        self,
        argv: list[str],
        stdin: str | None = None,
        files: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> SandboxResult:
        """Run `argv` in the sandbox (asyncio); `files` are written into workdir first.

        No process of the run survives it: after the program exits (or is killed), leftover
        background processes are killed so the pipes close and the next run starts clean.
        """
        if self._busy:
            raise RuntimeError("this Sandbox is already running a command; use one per episode")
        self._busy = True
        try:
            for rel, content in (files or {}).items():
                write_file(self.workdir, self._uid, rel, content)
            return await self._arun(argv, stdin, env)
        finally:
            self._busy = False

    async def _spawn(self, argv: list[str], stdin: str | None, env: dict[str, str] | None):
        """Start the child helper; with cgroups, move it into them meanwhile, from a thread.

        A move into a cgroup waits for an RCU grace period (5-20 ms of wall time, no CPU) on
        cgroup v1; from here that overlaps the helper's start-up. The helper waits for the go
        byte before it starts anything; EOF (harness gone, move failed) makes it exit.
        """
        go_r, go_w = os.pipe() if self._cgroups else (None, None)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._command(argv, go_r),
                cwd=self.workdir,
                env=self._env(env),
                start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(go_r,) if go_r is not None else (),
            )
        finally:
            if go_r is not None:
                os.close(go_r)
        if go_w is not None:
            try:
                await asyncio.to_thread(self._cgroups.attach, proc.pid)
                os.write(go_w, b"1")
            except OSError:  # e.g. it already died; without the byte it exits
                pass
            finally:
                os.close(go_w)
        return proc

    async def _arun(self, argv: list[str], stdin: str | None, env: dict[str, str] | None) -> SandboxResult:
        lim, t0 = self.limits, time.monotonic()
        proc = await self._spawn(argv, stdin, env)
        out, err = Capture(lim.max_output_chars), Capture(lim.max_output_chars)
        reason: list[str] = []

        async def pump(stream: asyncio.StreamReader, cap: Capture) -> None:
            # Read in chunks so a flood never accumulates; kill a program that floods on and on.
            while chunk := await stream.read(65536):
                cap.feed(chunk)
                if cap.total > _FLOOD_FACTOR * lim.max_output_chars and not reason:
                    reason.append(f"output limit ({_FLOOD_FACTOR * lim.max_output_chars} chars)")
                    self._kill_all(proc.pid)

        async def feed() -> None:
            try:
                proc.stdin.write(stdin.encode())
                await proc.stdin.drain()
                proc.stdin.close()
            except (BrokenPipeError, ConnectionResetError):  # the program did not read it all
                pass

        tasks = [asyncio.create_task(pump(proc.stdout, out)), asyncio.create_task(pump(proc.stderr, err))]
        if stdin is not None:
            tasks.append(asyncio.create_task(feed()))
        waiter = asyncio.create_task(proc.wait())
        timed_out = False
        # Poll the return code as well: a background process that keeps the pipes open may
        # delay wait() (depending on the Python version) although the program has exited.
        while not waiter.done() and proc.returncode is None:
            left = t0 + lim.wall_seconds - time.monotonic()
            if left <= 0:
                timed_out = True
                reason[:] = [f"wall time limit ({lim.wall_seconds:g} s)"]
                break
            await asyncio.wait({waiter}, timeout=min(left, 0.1))
        if timed_out or not self._caps["pid_namespace"]:
            # On timeout: the program itself. Otherwise: leftovers still in its group (the group
            # id stays reserved while any member lives; pids are allocated cyclically).
            self._kill_all(proc.pid)
        elif self._uid is not None:  # the pid namespace already took everything down
            kill_uid(self._uid)
        await asyncio.wait({waiter}, timeout=5)
        done, pending = await asyncio.wait(tasks, timeout=2)
        for task in pending:  # only without pid namespace and uid: an escaped process
            task.cancel()
        if pending and getattr(proc, "_transport", None) is not None:
            proc._transport.close()
        stdout, out_cut = out.text()
        stderr, err_cut = err.text()
        rc = proc.returncode
        if self._cgroups and self._oom_kills < (kills := self._cgroups.oom_kills()):
            self._oom_kills = kills  # the memory cgroup killed a process of this run
            reason[:] = reason or [f"memory limit ({lim.memory_mb} MB)"]
        killed_reason = reason[0] if reason else diagnose(lim, rc, stderr)
        if killed_reason is None and (out_cut or err_cut):
            killed_reason = f"output truncated ({lim.max_output_chars} chars)"
        return SandboxResult(
            returncode=rc,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            killed_reason=killed_reason,
            seconds=time.monotonic() - t0,
            truncated=out_cut or err_cut,
        )

    async def arun_python(self, code: str) -> SandboxResult:
        """Run Python `code` with the harness's interpreter in isolated mode (-I)."""
        if self._busy:
            raise RuntimeError("this Sandbox is already running a command; use one per episode")
        write_file(self.workdir, self._uid, "snippet.py", code)
        return await self.arun([sys.executable, "-I", "snippet.py"])

    def run(
        self,
        argv: list[str],
        stdin: str | None = None,
        files: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
    ) -> SandboxResult:
        """Blocking version of `arun`; also works when called inside a running event loop."""
        return _run_sync(self.arun(argv, stdin, files, env))

    def run_python(self, code: str) -> SandboxResult:
        """Blocking version of `arun_python`; `result.stdout` of "print(1+1)" is "2\\n"."""
        return _run_sync(self.arun_python(code))


def _run_sync(coro):
    """Run a coroutine to completion from synchronous code (own loop; a thread if one runs)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
