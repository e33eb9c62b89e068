"""Results files, written and read one way: JSON documents through a temporary file and a
rename, JSON-lines files by durable appends; read back with one line naming a damaged file and
what to do about it. And the faults of the machine under them (a full disk, a read-only or
forbidden directory, a name too long) as one line naming the path, never a traceback.
Standard library only.

Why one place: a damaged `summary.json` or eval records file, or an output directory on a full
disk, reach every command (`run`, `eval`, `report`, `compare`, `sweep`); each reader and writer
handling them on its own would answer each differently, or not at all.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

FAULTS = {
    errno.ENOSPC: "free some space there, or choose another output directory (what was completed is kept)",
    errno.EDQUOT: "free some of your quota there, or choose another output directory (what was completed is kept)",
    errno.EROFS: "choose a directory on a writable file system",
    errno.EACCES: "choose a directory you may write to, or change its permissions",
    errno.EPERM: "choose a directory you may write to, or change its permissions",
    errno.ENAMETOOLONG: "choose a shorter name (at most 255 bytes per name, 4096 per path)",
}
"""The faults of the machine a command cannot work around -> what the user can do about them."""
SPACE_FAULTS = (errno.ENOSPC, errno.EDQUOT)
"""Faults of a write, which may name no file (the write after a successful open fails)."""

LOW_SPACE_BYTES = 1 << 20
"""Free space below which a failed write that gave no reason is taken for a full disk (a writer
that fails on a full disk has used up what was left)."""


PROBE_BYTES = 1 << 16
"""What `check_writable` writes: a disk with less free is as good as full for any output."""


class DamagedFileError(ValueError):
    """A results file that cannot be read (truncated, not JSON, not UTF-8): one line naming it,
    what is wrong with it and what to do."""


def fault_message(exc: OSError) -> str | None:
    """One line for an environment fault (`FAULTS`): the path, the system's reason and what
    to do; None for any other OSError (a bug, kept with its traceback), and for a refusal that
    names no path (EACCES, EPERM from something other than a file: not the output's fault)."""
    todo = FAULTS.get(exc.errno) if exc.errno is not None else None
    where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    if todo is None or not (where or exc.errno in SPACE_FAULTS):
        return None
    reason = (exc.strerror or os.strerror(exc.errno)).lower()
    return f"{where or 'writing the output'}: {reason}; {todo}"


def named(exc: OSError, path: str | Path) -> OSError:
    """`exc` with `path` as its file name when it has none (a write that fails on a full disk
    names no file: the one being written is the one to name)."""
    if exc.filename is None:
        exc.filename = str(path)
    return exc


def as_fault(exc: BaseException, where: str | Path) -> OSError | None:
    """The environment fault behind `exc`, raised by a library (torch, safetensors) while
    writing below the directory `where`, as an OSError naming `where`: from the error itself
    (an OSError, or a message quoting the system's reason, as safetensors' and torch's do when
    a file cannot be opened or written), or from the state of `where`'s file system
    (read-only, or no space left: torch's writer says only "unexpected pos" then); None when
    it is not one."""
    if isinstance(exc, OSError) and exc.errno in FAULTS:
        return named(exc, where)
    quoted = [code for code in FAULTS if os.strerror(code) in str(exc)]
    code = quoted[0] if quoted else _file_system_fault(Path(where))
    return None if code is None else OSError(code, os.strerror(code), str(where))


def _file_system_fault(where: Path) -> int | None:
    """EROFS or ENOSPC when `where`'s file system (its nearest existing directory) is read-only
    or (nearly) full, else None."""
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        stat = os.statvfs(where)
    except OSError:
        return None
    if stat.f_flag & os.ST_RDONLY:
        return errno.EROFS
    free_blocks = stat.f_bfree if os.geteuid() == 0 else stat.f_bavail  # root may use the reserve
    return errno.ENOSPC if free_blocks * stat.f_frsize < LOW_SPACE_BYTES else None


def check_writable(directory: str | Path) -> None:
    """Make `directory` (and its parents) and write a small file into it, then remove both: a
    fault of the machine under an output (read-only, forbidden, full, a name too long) shows up
    here, before any expensive work, as the OSError a write would raise, naming the path. The
    directories it made are removed again, so a later refusal (bad input found after this check)
    leaves nothing behind; the writers make their directories themselves."""
    directory = Path(directory)
    made = [d for d in (directory, *directory.parents) if not d.exists()]
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-probe-{os.getpid()}"
        try:
            with open(probe, "wb") as f:
                f.write(bytes(PROBE_BYTES))
                f.flush()
                os.fsync(f.fileno())
        finally:
            try:
                probe.unlink(missing_ok=True)
            except OSError:
                pass  # it was never made
    except OSError as exc:
        raise named(exc, directory) from None
    finally:
        for d in made:  # deepest first
            try:
                d.rmdir()
            except OSError:
                pass  # never made, or someone else wrote into it meanwhile


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename: a reader sees the old file
    or the new one, never a part. A failed write leaves no temporary file and names `path`."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the directory itself cannot be written: nothing was left there
        raise named(exc, path) from None


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON to `path` atomically (`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, indent=2, default=str) + "\n")


def append_line(path: str | Path, line: str, sync: bool = True) -> None:
    """Append one line to `path` (flushed; with `sync`, on disk before this returns). A failed
    append names `path`; what it left is a torn last line, which `read_jsonl` skips."""
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            if sync:
                os.fsync(f.fileno())
    except OSError as exc:
        raise named(exc, path) from None


def read_json(path: str | Path) -> dict[str, Any]:
    """The JSON object in `path`; DamagedFileError (which file, what is wrong, what to do) when
    it is not one."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedFileError(f"{path}: {_what_is_wrong(exc, raw)}; {remedy(path)}") from None
    if not isinstance(data, dict):
        raise DamagedFileError(f"{path}: holds a JSON {type(data).__name__}, not an object; {remedy(path)}")
    return data


def read_jsonl(path: str | Path, *, appended: bool) -> list[dict[str, Any]]:
    """The records of a JSON-lines file, in file order (none when it does not exist).

    `appended`: the file grows by appends (metrics, events, a partial evaluation), so a line
    that does not parse is a torn append of a killed process and ends the reading there (a
    resume rewrites what follows). Otherwise the file was written whole, and any line that
    does not parse is damage: DamagedFileError naming the file and the line."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    lines = path.read_bytes().split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            if appended:
                break
            problem = _what_is_wrong(exc, line)
            raise DamagedFileError(f"{path}: line {number} {problem}; {remedy(path)}") from None
        rows.append(row)
    return rows


def _what_is_wrong(exc: ValueError, raw: bytes) -> str:
    """What a decode error says about the bytes it read, in words."""
    if isinstance(exc, UnicodeDecodeError):
        return f"is not UTF-8 text (byte {exc.start}), so not JSON: it is damaged"
    assert isinstance(exc, json.JSONDecodeError)
    if not raw.strip():
        return "is empty"
    if exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string"):
        return "ends in the middle of a JSON value: it was cut short (a kill or a full disk while it was written)"
    return f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): it is damaged"


def remedy(path: Path) -> str:
    """What the user can do about a damaged results file, by its name."""
    name = path.name
    if name in ("comparison.json", "sweep.json"):
        command = "compare" if name == "comparison.json" else "sweep"
        return (
            f"remove it and run the same bench {command} command again: it writes the file anew and "
            "resumes from the run directories"
        )
    if name == "summary.json":
        return (
            "remove it: the run then reads as unfinished, and resuming it (bench run --resume RUN_DIR, or "
            "its comparison or sweep) trains on from its last checkpoint and writes it again"
        )
    if name == "sweep_summary.json":
        return f"remove it and run bench sweep --show {path.parent} to write it again"
    if name == "env.json":
        return "remove it: only the run's provenance (commit, versions, hardware) is lost"
    if name.endswith((".summary.json", ".jsonl")):  # an evaluation's (the run's own .jsonl files never raise)
        bench = name.removesuffix(".summary.json").removesuffix(".jsonl")
        return (
            f"remove {bench}.jsonl and {bench}.summary.json from {path.parent} and evaluate again "
            f"(bench eval --bench {bench} --out {path.parent})"
        )
    return "restore it from a copy, or remove it and run the command that wrote it again"
