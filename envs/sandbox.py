"""Sandbox for model-generated code and shell commands (math tool calls, SWE test runs).

Every run starts a fresh child in its own session, with a minimal environment, its own working
directory as cwd and, when the machine allows (see `Sandbox.capabilities()`):

* resource limits (rlimits): CPU seconds, address space, file size, process count, no cores;
* a wall-clock limit: the whole process group is SIGKILLed, and with it the pid namespace;
* a pid namespace: the program cannot see or signal any outside process (the harness), and
  when it ends, everything it started ends too (background jobs, setsid escapees), reaped;
* a dedicated unprivileged uid/gid per `Sandbox` (root harness only). It is what makes the
  process limit work as root (the kernel ignores RLIMIT_NPROC for root) and stops the program
  from reading root-only files (/root, /etc/shadow, 0700 directories) or signalling root
  processes. Root-only directories that the interpreter needs (e.g. /root/.pyenv) are exposed
  through a private mount namespace, which hides the rest of them (`expose_paths`);
* a new network namespace with only its own loopback: no route to the host or the internet.

Not contained: world-readable files stay readable (the rest of the filesystem is visible,
/proc included), world-writable places (/tmp, /dev/shm) are writable and files left there stay
(TMPDIR points at the working directory instead), and the rlimits apply per process (n
processes may use n times the CPU/memory, up to the wall limit and process limit). The
dedicated uid has no passwd entry (`whoami` fails; git run by root in a workdir owned by it
needs `safe.directory`). Without root there is no dedicated uid, so the program can read what
the harness user can; namespaces then need unprivileged user namespaces (inside one the
process limit is exact; without, it is set above the user's current task count). Where a
mechanism is missing the run goes ahead without it; `capabilities()` says which. Linux only;
standard library only.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from envs._sandbox_child import Capture, allocate_uid, kill_uid

_CHILD = Path(__file__).with_name("_sandbox_child.py")
_FLOOD_FACTOR = 100  # a program printing 100x max_output_chars is killed instead of drained
_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run. `network=False` asks for a network namespace (if available)."""

    cpu_seconds: float = 10.0
    wall_seconds: float = 20.0
    memory_mb: int = 1024
    max_processes: int = 64
    max_file_mb: int = 64
    max_output_chars: int = 8000
    network: bool = False


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
            parts.append(f"[killed by signal {_signame(-rc)}]" if rc < 0 else f"[exit code {rc}]")
        reason = self.killed_reason
        if reason and reason.startswith("output truncated"):
            parts.append(f"[sandbox: {reason}]")
        elif reason:
            parts.append(f"[sandbox: {reason} exceeded" + ("; the program was killed]" if killed else "]"))
        return "\n".join(parts) if parts else "(no output)"


def _signame(num: int) -> str:
    """'SIGXCPU' for 24; the number itself for unknown signals."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def _diagnose(limits: SandboxLimits, rc: int | None, err: str) -> str | None:
    """Name the limit behind an exit status or error message (None when nothing points to one).

    Signals are exact (SIGXCPU/SIGXFSZ, also as a shell's 128+n); Python and C programs
    report exceeded memory, file size and process limits as errors, recognised by their text.
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
    return None


def _keep_paths(workdir: Path | None = None) -> list[str]:
    """Paths the sandboxed program must reach: the interpreter's prefixes and the workdir."""
    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    return sorted({os.path.realpath(p) for p in paths} | ({str(workdir)} if workdir else set()))


@functools.lru_cache(maxsize=1)
def _probe() -> dict[str, bool]:
    """Run the child helper's probe once per process (each mechanism in a throwaway child)."""
    cfg = {"probe": True, "uid": 65534, "gid": 65534, "python": sys.executable, "keep": _keep_paths()}
    try:
        out = subprocess.run(
            [sys.executable, "-I", "-S", str(_CHILD), json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=60,
            env={"PATH": _PATH},
        ).stdout
        caps = json.loads(out)
    except (OSError, ValueError, subprocess.SubprocessError):
        caps = {"rlimits": True}
    for key in (
        "network_namespace",
        "mount_namespace",
        "pid_namespace",
        "unprivileged_uid",
        "parent_kill_protection",
    ):
        caps.setdefault(key, False)
    # As root, RLIMIT_NPROC only works under a non-root uid; as a user it is enforced (approximately).
    caps["process_limit"] = caps["unprivileged_uid"] or os.geteuid() != 0
    caps["file_isolation"] = caps["unprivileged_uid"]  # permission-based, see the module docstring
    # A pid namespace hides every outside process from kill(); its end kills all inside it.
    caps["parent_kill_protection"] = caps["parent_kill_protection"] or caps["pid_namespace"]
    caps["kill_escaped_processes"] = caps["unprivileged_uid"] or caps["pid_namespace"]
    return caps


def _cleanup(uid: int | None, lock_fd: int | None, own_dir: Path | None) -> None:
    """Kill leftovers, remove an owned workdir and free the uid (also runs at garbage collection)."""
    if uid is not None:
        kill_uid(uid)
    if own_dir is not None:
        shutil.rmtree(own_dir, ignore_errors=True)  # rmtree never follows symlinks
    if lock_fd is not None:
        os.close(lock_fd)


class Sandbox:
    """Runs untrusted programs under `limits` in `workdir`, one run at a time.

    With `workdir=None` a private temporary directory is created and removed by `close()`.
    A given `workdir` is kept, but as root it is chowned (recursively) to the sandbox uid so
    the program can write there. For concurrency use one Sandbox per episode.
    """

    def __init__(self, limits: SandboxLimits = SandboxLimits(), workdir: Path | None = None):
        self.limits = limits
        self._caps = self.capabilities()
        self._uid = self._lock_fd = None
        if self._caps["unprivileged_uid"]:
            self._uid, self._lock_fd = allocate_uid()
            kill_uid(self._uid)  # leftovers of a crashed harness that held this uid
        own = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="rlbench-sbx-") if own else workdir).resolve()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self._uid is not None:
            for root, dirs, files in os.walk(self.workdir):
                for name in [".", *dirs, *files]:
                    os.chown(os.path.join(root, name), self._uid, self._uid, follow_symlinks=False)
        self._busy = False
        self._finalizer = weakref.finalize(
            self, _cleanup, self._uid, self._lock_fd, self.workdir if own else None
        )

    @staticmethod
    def capabilities() -> dict[str, bool]:
        """Which isolation this machine provides (probed once per process, then cached)."""
        return dict(_probe())

    def close(self) -> None:
        """Kill any leftover process, delete the owned workdir, release the uid. Idempotent."""
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write_file(self, rel: str, content: str) -> None:
        """Write `content` to `rel` inside workdir, refusing any path or symlink leading out."""
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"file path must stay inside the working directory: {rel!r}")
        target = self.workdir / rel
        # Safe against symlinks planted by an earlier run: no sandbox process runs between runs.
        if not target.parent.resolve().is_relative_to(self.workdir):
            raise ValueError(f"file path leads outside the working directory: {rel!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)
        if self._uid is not None:
            path = target
            while path != self.workdir:
                os.chown(path, self._uid, self._uid, follow_symlinks=False)
                path = path.parent

    def _command(self, argv: list[str]) -> list[str]:
        """The child-helper command line that sets up isolation and then execs `argv`."""
        lim = self.limits
        cpu = max(1, math.ceil(lim.cpu_seconds))
        cfg = {
            "cpu": cpu,
            "as": lim.memory_mb << 20,
            "fsize": lim.max_file_mb << 20,
            "nproc": lim.max_processes,
            "uid": self._uid,
            "gid": self._uid,
            "keep": _keep_paths(self.workdir),
            "netns": not lim.network and self._caps["network_namespace"],
            "pidns": self._caps["pid_namespace"],
        }
        return [sys.executable, "-I", "-S", str(_CHILD), json.dumps(cfg), *argv]

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
                self._write_file(rel, content)
            return await self._arun(argv, stdin, env)
        finally:
            self._busy = False

    async def _arun(self, argv: list[str], stdin: str | None, env: dict[str, str] | None) -> SandboxResult:
        lim, t0 = self.limits, time.monotonic()
        proc = await asyncio.create_subprocess_exec(
            *self._command(argv),
            cwd=self.workdir,
            env=self._env(env),
            start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
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
        killed_reason = reason[0] if reason else _diagnose(lim, rc, stderr)
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
        self._write_file("snippet.py", code)
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
