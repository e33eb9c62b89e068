"""The journal file of a run queue (`sweeps.queue.open_storage`): Optuna's JournalFileBackend,
made to survive a kill or a full disk in the middle of an append.

Optuna appends each record as one JSON line. A process killed (or a disk that fills) during
an append leaves a torn last line. Optuna's reader skips a last line it cannot parse, but the
next append lands after the torn bytes; the two become one damaged line with records after
it, and from then on every reader raises at it: the sweep or comparison could never be
resumed. Every record after a damaged line is one that no reader ever applied (each stopped
there), and every record before it is intact. So here:

* **Before each append**, under the journal's lock, a damaged tail (a torn last line, or last
  lines that do not parse) is cut off, and an append that fails (a full disk) is cut back off
  at once: the file always ends with a complete record. The record lost was being written
  when the process died; the study never held it, and the run it was about is found in its
  run directory when the queue takes it over (`sweeps.runs.train_or_resume`: a finished run
  is not trained again, a finished evaluation is kept).
* **A damaged line with records after it** (an older version's journal, or a damaged disk) is
  not cut silently: reading it raises `JournalDamaged`, one line naming the file, the line and
  what to do.
* **The lock is an flock** on `<journal>.flock`, which the kernel drops when its holder dies.
  Optuna's default lock, a symlink `<journal>.lock`, stays behind when its holder is killed
  during an append, and every later process waits 30 s (with warnings) before breaking it.
  Processes of one version use one lock; a journal shared with another Optuna client (e.g.
  optuna-dashboard writing notes) relies on appends of one line being atomic, as on any local
  file system.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from optuna.storages.journal import JournalFileBackend

from results.files import named
from sweeps.errors import ExperimentError

LOCK_SUFFIX = ".flock"
CHUNK_BYTES = 1 << 16
"""How much of the journal's end is read at a time, looking for its last line."""


class JournalDamaged(ExperimentError):
    """A journal damaged before its last line (one-line message: which file, line, what to do)."""


class FileLock:
    """A lock of the journal between processes (an flock of `path`, dropped by the kernel when
    the holder dies) and threads (reentrant within a thread, so an append can hold it across
    Optuna's own acquire). Optuna's journal backend calls only `acquire` and `release`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._thread = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Block until this thread holds the lock."""
        self._thread.acquire()
        if self._depth == 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                self._thread.release()
                raise
            self._fd = fd
        self._depth += 1
        return True

    def release(self) -> None:
        """Release one `acquire`."""
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._thread.release()


class RepairingJournal(JournalFileBackend):
    """Optuna's journal file backend on `path`, with the repairs of the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path, self.lock = Path(path), FileLock(str(path) + LOCK_SUFFIX)
        try:
            super().__init__(str(path), lock_obj=self.lock)
        except OSError as exc:
            raise named(exc, path) from None

    def read_logs(self, log_number_from: int) -> Iterator[dict[str, Any]]:
        """Optuna's records from `log_number_from` on; JournalDamaged at a damaged line that
        has lines after it (Optuna raises a bare decode error there)."""
        try:
            yield from super().read_logs(log_number_from)
        except ValueError:
            raise JournalDamaged(damage_message(self.path)) from None

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        """Append `logs` after cutting off a damaged tail; a failed append is cut back off."""
        self.lock.acquire()
        try:
            size = drop_damaged_tail(self.path)
            try:
                super().append_logs(logs)
            except OSError as exc:  # e.g. a full disk: leave no torn record behind
                _truncate(self.path, size)
                raise named(exc, self.path) from None
        finally:
            self.lock.release()


def _truncate(path: Path, size: int) -> None:
    """Cut `path` to `size` bytes if the file system lets us (a failed cut leaves a torn last
    line, which the next append cuts off)."""
    try:
        os.truncate(path, size)
    except OSError:
        pass


def drop_damaged_tail(path: Path) -> int:
    """Cut off the journal's damaged tail (a torn last line, and any last lines that do not
    parse), saying so on stderr; the size it keeps. Call it holding the journal's lock. Reads
    only the file's last lines."""
    with open(path, "rb") as f:
        size = keep = f.seek(0, os.SEEK_END)
        while keep:
            start = _line_start(f, keep)
            f.seek(start)
            if _is_record(f.read(keep - start)):
                break
            keep = start
    if keep < size:
        _truncate(path, keep)
        print(
            f"bench: note: {path}: dropped {size - keep} bytes of a torn last record (a process killed, "
            "or a disk full, while appending it); the run it was about is found in its run directory",
            file=sys.stderr,
        )
    return keep


def _line_start(f: BinaryIO, end: int) -> int:
    """The offset where the line that ends at `end` (its newline, or the torn end of the file)
    starts: just after the newline before it, or 0."""
    pos = end - 1  # the line's own last byte is never the separator before it
    while pos > 0:
        low = max(0, pos - CHUNK_BYTES)
        f.seek(low)
        found = f.read(pos - low).rfind(b"\n")
        if found >= 0:
            return low + found + 1
        pos = low
    return 0


def _is_record(line: bytes) -> bool:
    """Whether one journal line is complete (ends with its newline) and parses as a JSON object."""
    if not line.endswith(b"\n"):
        return False
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return False


def damage_message(path: Path) -> str:
    """One line: which line of the journal is damaged and what to do."""
    lines = path.read_bytes().split(b"\n")
    total = len(lines) - 1  # the last element is what follows the last newline
    bad = next((i for i, line in enumerate(lines, 1) if not _is_record(line + b"\n")), total)
    return (
        f"{path}: line {bad} of {total} is damaged and records follow it (not a torn last append, "
        f"which is repaired), so the study cannot be read; keep a copy of the file, keep only its first "
        f"{bad - 1} lines (head -n {bad - 1}) and run the same command again: the study resumes from them, "
        "and runs finished since are found in their run directories"
    )
