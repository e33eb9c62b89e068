"""Results files read and written one way (`results.files`): a damaged file is one line naming
it, what is wrong and what to do; a fault of the machine (full, read-only, forbidden, a name
too long) is one line naming the path; a failed write leaves nothing half-written."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from results import files
from results.files import (
    DamagedFileError,
    append_line,
    as_fault,
    check_writable,
    fault_message,
    read_json,
    read_jsonl,
    write_json_atomic,
)

DAMAGED_JSON = [  # (file name, content, what the message says is wrong, what it says to do)
    (
        "summary.json",
        b'{"outcome": "finished", "wall',
        "cut short",
        "remove it: the run then reads as unfinished",
    ),
    ("comparison.json", b'{"task": "arith",\n  "arms": [', "cut short", "run the same bench compare command"),
    ("sweep.json", b"", "is empty", "run the same bench sweep command"),
    ("config.json", b"\x8c\xff\x00garbage", "not UTF-8 text (byte 0)", "restore it from a copy"),
    ("env.json", b'{"a": 1} trailing', "not valid JSON (Extra data at line 1 column 10)", "provenance"),
    ("arith.summary.json", b"[1, 2]", "holds a JSON list, not an object", "evaluate again"),
    ("sweep_summary.json", b'{"arms": {"sao": {"cou', "cut short", "run bench sweep --show"),
]


@pytest.mark.parametrize("name, content, wrong, todo", DAMAGED_JSON, ids=[c[0] for c in DAMAGED_JSON])
def test_a_damaged_json_file_is_one_line_naming_it_and_what_to_do(tmp_path, name, content, wrong, todo):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DamagedFileError) as caught:
        read_json(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and wrong in message and todo in message
    assert "\n" not in message


def test_eval_records_of_random_bytes_name_the_file_and_the_line(tmp_path):
    path = tmp_path / "arith.jsonl"
    path.write_bytes(b'{"problem": 0}\n' + bytes(range(128, 256)) + b"\n")
    with pytest.raises(DamagedFileError, match=r"arith.jsonl: line 2 is not UTF-8 text") as caught:
        read_jsonl(path, appended=False)
    assert "remove arith.jsonl and arith.summary.json" in str(caught.value)


def test_an_appended_file_ends_at_its_first_torn_line_and_a_whole_file_does_not(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step": 1}\n{"step": 2}\n{"step": 3, "lo')
    assert read_jsonl(path, appended=True) == [{"step": 1}, {"step": 2}]
    with pytest.raises(DamagedFileError, match="line 3 ends in the middle of a JSON value"):
        read_jsonl(path, appended=False)
    path.write_bytes(b'{"step": 1}\n\xc3')  # a torn multi-byte character
    assert read_jsonl(path, appended=True) == [{"step": 1}]
    assert read_jsonl(tmp_path / "missing.jsonl", appended=True) == []


FAULTS = [  # (errno, what the line says)
    (errno.ENOSPC, "no space left on device; free some space there"),
    (errno.EDQUOT, "disk quota exceeded; free some of your quota"),
    (errno.EROFS, "read-only file system; choose a directory on a writable file system"),
    (errno.EACCES, "permission denied; choose a directory you may write to"),
    (errno.EPERM, "operation not permitted; choose a directory you may write to"),
    (errno.ENAMETOOLONG, "file name too long; choose a shorter name"),
]


@pytest.mark.parametrize("code, says", FAULTS, ids=[errno.errorcode[c] for c, _ in FAULTS])
def test_a_fault_of_the_machine_is_one_line_naming_the_path(code, says):
    message = fault_message(OSError(code, os.strerror(code), "/data/out"))
    assert message.startswith(f"/data/out: {says}") and "\n" not in message


def test_other_os_errors_are_not_faults_of_the_machine():
    assert fault_message(OSError(errno.EBADF, "Bad file descriptor")) is None
    assert fault_message(FileNotFoundError(errno.ENOENT, "No such file or directory", "x")) is None
    assert fault_message(PermissionError(errno.EPERM, "Operation not permitted")) is None  # e.g. a signal
    assert fault_message(OSError(errno.ENOSPC, "No space left on device")).startswith(
        "writing the output: no space left on device"
    )


def test_a_write_that_fails_on_a_full_disk_names_its_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    def full(self, *args, **kwargs):
        Path.open(self, "w").close()  # the temporary file exists, then the disk is full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # a failed write names no file

    monkeypatch.setattr(Path, "write_text", full)
    target = tmp_path / "summary.json"
    with pytest.raises(OSError) as caught:
        write_json_atomic(target, {"a": 1})
    assert caught.value.filename == str(target) and caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_an_append_that_fails_names_its_file(tmp_path, monkeypatch):
    def over_quota(fd: int) -> None:
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT))

    monkeypatch.setattr(files.os, "fsync", over_quota)
    with pytest.raises(OSError) as caught:
        append_line(tmp_path / "events.jsonl", json.dumps({"event": "resume"}))
    assert caught.value.filename == str(tmp_path / "events.jsonl")


class _Statvfs:
    def __init__(self, free_bytes: int, read_only: bool = False) -> None:
        self.f_frsize, self.f_bfree = 4096, free_bytes // 4096
        self.f_bavail, self.f_flag = self.f_bfree, os.ST_RDONLY if read_only else 0


LIBRARY_ERRORS = [  # (what a library raised, the file system's state, the fault it is)
    (
        RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534"),
        _Statvfs(0),
        errno.ENOSPC,
    ),
    (RuntimeError("open file failed with strerror: Read-only file system"), _Statvfs(1 << 30), errno.EROFS),
    (
        ValueError("Error while serializing: I/O error: No space left on device (os error 28)"),
        _Statvfs(5 << 20),
        errno.ENOSPC,
    ),
    (RuntimeError("unexpected pos 576 vs 534"), _Statvfs(1 << 30, read_only=True), errno.EROFS),
    (RuntimeError("unexpected pos 576 vs 534"), _Statvfs(1 << 30), None),  # plenty of space: a bug
    (TypeError("a bug"), _Statvfs(1 << 30), None),
]


@pytest.mark.parametrize("exc, fs, code", LIBRARY_ERRORS)
def test_a_library_error_while_writing_is_taken_for_the_fault_behind_it(tmp_path, monkeypatch, exc, fs, code):
    monkeypatch.setattr(files.os, "statvfs", lambda path: fs)
    fault = as_fault(exc, tmp_path / "checkpoints" / ".tmp_step_000002")  # not made yet: its parent is asked
    if code is None:
        assert fault is None
    else:
        assert fault.errno == code and fault.filename == str(tmp_path / "checkpoints" / ".tmp_step_000002")


def test_check_writable_leaves_the_file_system_as_it_found_it(tmp_path):
    # the directories it made go again: bad input found after the check leaves nothing behind
    # (a --out of bench eval stayed behind when the Docker daemon was then found missing)
    check_writable(tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "c").mkdir()
    check_writable(tmp_path / "c")
    assert (tmp_path / "c").is_dir() and list((tmp_path / "c").iterdir()) == []
    with pytest.raises(OSError) as caught:
        check_writable(tmp_path / ("x" * 300))
    assert caught.value.errno == errno.ENAMETOOLONG and fault_message(caught.value).startswith(str(tmp_path))
