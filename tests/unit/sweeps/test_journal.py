"""The run queue's journal file survives a kill or a full disk mid-append (`sweeps.journal`): a
torn last record is dropped and the study reads as it was before it, whatever byte the cut
falls on; a failed append leaves nothing behind; a damaged line with records after it is one
line naming it; a killed lock holder blocks no one."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sweeps.journal import LOCK_SUFFIX, JournalDamaged
from sweeps.queue import RunQueue, open_storage


def _queue(path: Path) -> RunQueue:
    return RunQueue(open_storage("", path), "study")


def _states(path: Path) -> dict[str, tuple[str, dict]]:
    """Run -> (state, user attributes) of every run's latest trial, as a fresh process reads
    them (a RunQueue would append a record: opening a study writes one)."""
    storage = open_storage("", path)
    trials = storage.get_all_trials(storage.get_study_id_from_name("study"))
    return {t.user_attrs["run"]: (t.state.name, dict(t.user_attrs)) for t in trials}


def _journal(tmp_path: Path) -> Path:
    """A journal whose last record sets a user attribute holding a two-byte character, written
    raw (as a journal writer that keeps non-ASCII text may), so that a cut can split it."""
    path = tmp_path / "study.journal"
    q = _queue(path)
    q.ensure(["a", "b", "c"])
    claim = q.claim()
    q.finish(claim, 1.0, {"state": "finished"})
    q.storage.set_trial_user_attr(q.latest()["b"]._trial_id, "detail", "café")
    lines = path.read_bytes().split(b"\n")[:-1]
    lines[-1] = json.dumps(json.loads(lines[-1]), ensure_ascii=False, separators=(",", ":")).encode()
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _cut(path: Path, where: str) -> tuple[bytes, int]:
    """(the journal before its last record, the byte offset to cut it at) for a cut `where`."""
    data = path.read_bytes()
    last_start = data.rfind(b"\n", 0, len(data) - 1) + 1
    offsets = {
        "inside the last record": last_start + 20,
        "at a record boundary": last_start,
        "inside a multi-byte character": data.rindex("é".encode()) + 1,
        "just before the last newline": len(data) - 1,
    }
    return data[:last_start], offsets[where]


CUTS = [
    "inside the last record",
    "at a record boundary",
    "inside a multi-byte character",
    "just before the last newline",
]


@pytest.mark.parametrize("where", CUTS)
def test_a_torn_last_record_is_dropped_and_the_queue_resumes(tmp_path, capsys, where):
    path = _journal(tmp_path)
    whole = _states(path)
    before, offset = _cut(path, where)
    expected = _states(
        _write(tmp_path / "ref" / "study.journal", before)
    )  # the study without its last record
    assert expected["b"][1].get("detail") is None and whole["b"][1]["detail"] == "café"
    path.write_bytes(path.read_bytes()[:offset])
    assert _states(path) == expected  # a reader skips the torn record
    _queue(path).ensure(["a", "b", "c", "d"])  # the next append cuts it off first
    after = _states(path)
    assert {run: after[run] for run in expected} == expected and after["d"][0] == "WAITING"
    assert path.read_bytes().startswith(before) and path.read_bytes().endswith(b"\n")
    note = capsys.readouterr().err
    assert (f"{path}: dropped {offset - len(before)} bytes of a torn last record" in note) == (
        offset > len(before)
    )


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_damaged_line_with_records_after_it_is_one_line_naming_it(tmp_path):
    path = _journal(tmp_path)
    lines = path.read_bytes().split(b"\n")[:-1]
    total = len(lines)
    lines[4] = lines[4][:17] + lines[5]  # an older version's append after a torn record
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(JournalDamaged) as caught:
        _queue(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: line 5 of {total} is damaged and records follow it")
    assert "keep only its first 4 lines (head -n 4)" in message and "\n" not in message


def test_an_append_that_fails_on_a_full_disk_leaves_no_torn_record(tmp_path, monkeypatch):
    path = tmp_path / "study.journal"
    q = _queue(path)
    q.ensure(["a"])
    size = path.stat().st_size
    real_fsync = os.fsync

    def full(fd: int) -> None:  # the record is written, then the disk turns out full
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError) as caught:
        q.ensure(["a", "b"])
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    assert path.stat().st_size == size
    _queue(path).ensure(["a", "b"])
    assert set(_states(path)) == {"a", "b"}


def test_a_lock_holder_killed_mid_append_blocks_no_one(tmp_path, monkeypatch):
    """The kernel drops an flock with its holder; Optuna's symlink lock, left by a killed
    holder, is never consulted (it would stall every process 30 s)."""
    from optuna.storages.journal import JournalFileSymlinkLock

    path = tmp_path / "study.journal"
    _queue(path).ensure(["a"])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from sweeps.journal import FileLock; FileLock(sys.argv[1]).acquire(); "
            "print('held', flush=True); time.sleep(600)",
            str(path) + LOCK_SUFFIX,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    fd = os.open(str(path) + LOCK_SUFFIX, os.O_RDWR)
    with pytest.raises(BlockingIOError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free the moment its holder is gone
    os.close(fd)
    os.symlink(path, str(path) + ".lock")  # Optuna's own lock, as a killed holder leaves it

    def never(self) -> bool:
        raise AssertionError("Optuna's symlink lock was used")

    monkeypatch.setattr(JournalFileSymlinkLock, "acquire", never)
    _queue(path).ensure(["a", "b"])
    assert set(_states(path)) == {"a", "b"}
