"""The run-directory contract: config.json, env.json, metrics.jsonl, checkpoints/, evals/,
summary.json. The training loop writes through `RunDir`; reports, comparisons and sweeps read
through it. Standard library only (no torch, nothing from `bench`), so reading results never
needs the runtime.

Writes are crash-safe: metrics lines are flushed and fsynced one by one, checkpoints are
written to a temporary directory and renamed into place, so a `kill -9` never leaves a
half-written checkpoint that `--resume` would pick up.

How a run ended is written by the run itself into summary.json, as typed values: `outcome`
(`RunOutcome`), `stopped_by` (the `results.budgets.BudgetKind` of a finished run), `detail`
(the reason of any other outcome) and the `pid` of the process that wrote it. A run marks
itself `running` when training starts (`mark_running`) and writes its end on every path it
sees: finished, a stop of its own (non-finite, starved), killed (SIGTERM, Ctrl-C) or failed (an
exception). What it cannot see, SIGKILL or a lost machine, leaves `running` behind: a reader
(`read_outcome`) takes `running` with no live holder of the run's lock for `killed`. A process
that finds the directory locked by another ends with `BUSY_EXIT_CODE` (`RunDirBusy`), so that a
scheduler can tell a duplicate start from a failure without reading its output.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import json
import math
import os
import shutil
import signal
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from results.budgets import BudgetKind
from results.files import (
    DamagedFileError,
    append_line,
    read_json,
    read_jsonl,
    write_json_atomic,
    write_text_atomic,
)

CHECKPOINT_PREFIX = "step_"
MANIFEST = "manifest.json"
"""Written last into every checkpoint: the size and sha256 of each of its files."""
LOCK_FILE = "run.lock"
SUMMARY_FILE = "summary.json"
BUSY_EXIT_CODE = 75
"""Exit code of a process that found its run directory locked by another (EX_TEMPFAIL)."""
LOCK_WAIT_S = 1.0
"""How long `RunDir.lock` retries a held lock: a reader's probe (`RunDir.is_locked`) holds it
for microseconds, a training process for the whole run."""


class RunOutcome(StrEnum):
    """How a run ended (summary.json `outcome`)."""

    RUNNING = "running"
    """training, or ended without a word (SIGKILL, power loss): `read_outcome` tells which"""
    FINISHED = "finished"
    """its budget stopped it (`stopped_by` says which kind)"""
    NON_FINITE = "non-finite"
    """it stopped itself after `nan_patience` non-finite losses or gradients in a row (diverged)"""
    STARVED = "starved"
    """it stopped itself: the algorithm rejected every rollout group for too long"""
    KILLED = "killed"
    """SIGTERM or Ctrl-C, or it died without recording an outcome"""
    FAILED = "failed"
    """an exception ended it (`detail` names it)"""


@dataclass(frozen=True)
class RunEnd:
    """What `RunDir.read_outcome` returns."""

    outcome: RunOutcome
    stopped_by: BudgetKind | None = None
    detail: str = ""
    pid: int | None = None
    """the process that wrote the outcome (None in summaries written before outcomes were)"""


ATTEMPT_PID_VARIABLE = "BENCH_ATTEMPT_PID"
"""Set by a `bench run` that places learner ranks of its own (`bench.placement`) for them: the
attempt is that process's, the one its caller waits for."""


def attempt_pid() -> int:
    """The pid that summary.json records as this attempt's (`RunEnd.pid`): the placing `bench
    run` for a placed rank, else this process."""
    placed = os.environ.get(ATTEMPT_PID_VARIABLE, "")
    return int(placed) if placed.isdigit() else os.getpid()


_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int) -> None:
    """Ask the kernel to send `sig` to this process when its parent dies (Linux's
    PR_SET_PDEATHSIG), for a run's or worker's child process, called between fork and exec
    (`preexec_fn`): a run whose worker died is then never trained twice at once. Elsewhere a
    no-op: the run directory's lock still guards the run."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def stop_with_launcher() -> None:
    """For a learner rank that `bench` placed (ATTEMPT_PID_VARIABLE set) under a launcher: SIGTERM
    to this rank when its launcher (torchrun) dies, so that it checkpoints and lets the run go.
    torchrun forwards a SIGTERM of its own to its ranks, but a launcher killed outright does not:
    Ray SIGKILLs a killed actor's child processes (torchrun), and its ranks went on training the
    run to its end beside the attempt that replaced them. A rank whose launcher was gone before
    the request took (its parent changed) sends itself the same SIGTERM at once."""
    if not os.environ.get(ATTEMPT_PID_VARIABLE):
        return
    launcher = os.getppid()
    die_with_parent(signal.SIGTERM)
    if os.getppid() != launcher:
        os.kill(os.getpid(), signal.SIGTERM)


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (e.g. --out of a non-empty directory)."""


class RunDirBusy(RunDirError):
    """The run directory is locked by another live process (exit code `BUSY_EXIT_CODE`)."""


class RunDir:
    """A run directory on disk and the operations the training loop needs on it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.checkpoints = self.path / "checkpoints"
        self.metrics_path = self.path / "metrics.jsonl"

    @classmethod
    def create(cls, path: str | Path, config: dict[str, Any], env: dict[str, Any]) -> RunDir:
        """Make a new run directory and write config.json and `env` (provenance) as env.json."""
        run = cls(path)
        existed = run.path.exists()
        if existed and any(run.path.iterdir()):
            raise RunDirError(
                f"--out {run.path} already exists and is not empty; use --resume {run.path} to continue it"
            )
        try:
            run.checkpoints.mkdir(parents=True, exist_ok=True)
            (run.path / "evals").mkdir(exist_ok=True)
            write_json_atomic(run.path / "config.json", config)
            write_json_atomic(run.path / "env.json", env)
            run.metrics_path.touch()
        except OSError:  # e.g. a full disk: leave nothing that would block the same --out later
            if not existed:
                shutil.rmtree(run.path, ignore_errors=True)
            raise
        return run

    def update_env(self, extra: dict[str, Any]) -> None:
        """Add keys to env.json (provenance learnt after the start, e.g. the engine's)."""
        path = self.path / "env.json"
        env = read_json(path) if path.exists() else {}
        write_json_atomic(path, {**env, **extra})

    def read_config(self) -> dict[str, Any]:
        """The resolved config this run was started with."""
        return read_json(self.path / "config.json")

    def append_metrics(self, record: dict[str, Any]) -> None:
        """Append one step's metrics as a JSON line, durably (NaN/inf are written as null,
        so every line is strict JSON)."""
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        append_line(self.metrics_path, json.dumps(clean, default=float))

    def append_event(self, record: dict[str, Any]) -> None:
        """Append one event (a resume, ...) to events.jsonl, durably, with its wall-clock time."""
        append_line(self.path / "events.jsonl", json.dumps({"time": time.time(), **record}, default=str))

    def append_timeline(self, record: dict[str, Any]) -> None:
        """Append one step's line to timeline.jsonl (flushed, not fsynced: it is diagnostics,
        and a torn last line is skipped by its readers)."""
        append_line(self.path / "timeline.jsonl", json.dumps(record, separators=(",", ":")), sync=False)

    def read_timeline(self) -> list[dict[str, Any]]:
        """All complete lines of timeline.jsonl (none when the file does not exist)."""
        return read_jsonl(self.path / "timeline.jsonl", appended=True)

    def read_events(self) -> list[dict[str, Any]]:
        """All complete lines of events.jsonl (none when the file does not exist)."""
        return read_jsonl(self.path / "events.jsonl", appended=True)

    def read_metrics(self) -> list[dict[str, Any]]:
        """All complete metric lines (a torn last line from a crash is ignored)."""
        return read_jsonl(self.metrics_path, appended=True)

    def truncate_metrics(self, last_step: int) -> None:
        """Keep only metric lines with step <= last_step (resume: no gap, no duplicate)."""
        keep = [r for r in self.read_metrics() if r.get("step", 0) <= last_step]
        write_text_atomic(self.metrics_path, "".join(json.dumps(r, default=float) + "\n" for r in keep))

    def checkpoint_dir(self, step: int) -> Path:
        """Where the checkpoint of `step` lives."""
        return self.checkpoints / f"{CHECKPOINT_PREFIX}{step:06d}"

    def pending_checkpoint_dir(self, step: int) -> Path:
        """The temporary directory the checkpoint of `step` is written into before it is published
        (other ranks of a run write their shards there too)."""
        return self.checkpoints / f".tmp_{CHECKPOINT_PREFIX}{step:06d}"

    def begin_checkpoint(self, step: int) -> Path:
        """A fresh temporary directory to write the checkpoint of `step` into."""
        tmp = self.pending_checkpoint_dir(step)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit_checkpoint(self, tmp: Path, step: int, keep_last: int = 2) -> Path:
        """Atomically publish a checkpoint written with `begin_checkpoint`: its files are synced
        to disk and listed with their sizes and hashes in `manifest.json`, then the directory is
        renamed into place; prune all but the latest `keep_last` (0 = keep every one)."""
        write_json_atomic(tmp / MANIFEST, {"step": step, "files": _file_digests(tmp)})
        _fsync_tree(tmp)
        final = self.checkpoint_dir(step)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        if keep_last > 0:
            for old in self.list_checkpoints()[:-keep_last]:
                shutil.rmtree(old, ignore_errors=True)
        return final

    def list_checkpoints(self) -> list[Path]:
        """Completed checkpoints, oldest first."""
        if not self.checkpoints.exists():
            return []
        return sorted(p for p in self.checkpoints.iterdir() if p.name.startswith(CHECKPOINT_PREFIX))

    def latest_checkpoint(self) -> Path | None:
        """The newest completed checkpoint, or None."""
        found = self.list_checkpoints()
        return found[-1] if found else None

    def latest_intact_checkpoint(self) -> tuple[Path | None, list[tuple[Path, str]]]:
        """(the newest checkpoint whose files match its manifest, the newer ones that do not,
        each with the reason): what a resume can trust after a crash or a damaged disk."""
        damaged = []
        for checkpoint in reversed(self.list_checkpoints()):
            problem = verify_checkpoint(checkpoint)
            if problem is None:
                return checkpoint, damaged
            damaged.append((checkpoint, problem))
        return None, damaged

    def lock(self) -> None:
        """Hold this run directory exclusively for the life of the process (or until `unlock`):
        a second process that trains or resumes it gets RunDirBusy. The lock is an flock, so
        the kernel drops it when the holder dies, even by SIGKILL."""
        key = str(self.path.resolve())
        if key in _HELD:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
                os.close(fd)
                raise RunDirBusy(
                    f"run directory {self.path} is in use by {holder}; wait for it to finish or stop it first"
                ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        _HELD[key] = fd

    def is_locked(self) -> bool:
        """Whether a live process (this one included) holds the run's lock."""
        if str(self.path.resolve()) in _HELD:
            return True
        try:
            fd = os.open(self.path / LOCK_FILE, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's lock at once
        return False

    def unlock(self) -> None:
        """Release `lock` (a no-op when this process does not hold it)."""
        fd = _HELD.pop(str(self.path.resolve()), None)
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write summary.json (its outcome, final metrics, timing, counts)."""
        write_json_atomic(self.path / SUMMARY_FILE, summary)

    def mark_running(self) -> None:
        """Record that this process trains the run now (summary.json `outcome: running`)."""
        self.write_summary({"outcome": RunOutcome.RUNNING, "pid": attempt_pid(), "started": time.time()})

    def read_outcome(self) -> RunEnd | None:
        """How the run ended (module docstring); None when it never started training. A
        summary written before outcomes were recorded is a finished run's (only those wrote one)."""
        path = self.path / SUMMARY_FILE
        if not path.exists():
            return None
        data = read_json(path)
        outcome = RunOutcome(data.get("outcome", RunOutcome.FINISHED))
        stopped_by = data.get("stopped_by")
        kind = BudgetKind(stopped_by) if stopped_by in tuple(BudgetKind) else None
        detail = str(data.get("detail") or "")
        if outcome is RunOutcome.RUNNING and not self.is_locked():
            outcome = RunOutcome.KILLED
            detail = "its process ended without recording an outcome (SIGKILL, out of memory, a lost machine)"
        return RunEnd(outcome, kind, detail, data.get("pid"))


_HELD: dict[str, int] = {}
"""Run directories this process has locked -> the open lock file (flock is per open file, so a
second lock of the same directory in one process must reuse it)."""


def _locks_stay_with_the_parent() -> None:
    """In a forked child (e.g. the rollout engine's process): close the inherited lock files, so
    that the lock is the locking process's alone and goes when it dies (a child that outlives it
    for a moment would otherwise hold the run, and a reader would not see it killed)."""
    for fd in _HELD.values():
        os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_locks_stay_with_the_parent)


def _file_digests(directory: Path) -> dict[str, dict[str, Any]]:
    """Relative path -> {size, sha256} of every file below `directory` but the manifest."""
    out = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST):
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        out[str(path.relative_to(directory))] = {"size": path.stat().st_size, "sha256": digest}
    return out


def _fsync_tree(directory: Path) -> None:
    """Flush every file below `directory`, and the directories themselves, to disk."""
    for path in [*directory.rglob("*"), directory]:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def verify_checkpoint(checkpoint: Path) -> str | None:
    """None when every file of `checkpoint` has the size and hash its manifest recorded; else
    what is wrong (a checkpoint written before manifests existed is trusted as it is)."""
    manifest = checkpoint / MANIFEST
    if not manifest.exists():
        legacy = (checkpoint / "learner.pt").exists() and (checkpoint / "policy").is_dir()
        return None if legacy else "no manifest.json and incomplete"
    try:
        files = read_json(manifest)["files"]
    except (DamagedFileError, KeyError, TypeError):
        return "manifest.json is unreadable"
    actual = _file_digests(checkpoint)
    for name, expected in files.items():
        if name not in actual:
            return f"{name} is missing"
        if actual[name]["size"] != expected["size"]:
            return f"{name} has {actual[name]['size']} bytes, {expected['size']} were written"
        if actual[name]["sha256"] != expected["sha256"]:
            return f"{name} does not match the hash written at save"
    return None
