"""Evaluation records on disk: `<bench>.jsonl` (one record per sample) and `<bench>.summary.json`.

`bench eval` and in-training evaluations write through `write_eval`; comparisons and reports
read through `read_records` and `read_summary`. Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from results.files import named, read_json, read_jsonl, write_json_atomic, write_text_atomic


def eval_paths(out_dir: str | Path, benchmark: str) -> tuple[Path, Path]:
    """(records file, summary file) of `benchmark` in `out_dir`."""
    out = Path(out_dir)
    return out / f"{benchmark}.jsonl", out / f"{benchmark}.summary.json"


def write_eval(
    out_dir: str | Path, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]
) -> tuple[Path, Path]:
    """Write `<out_dir>/<bench>.jsonl` (records) and `<out_dir>/<bench>.summary.json`, each atomically."""
    records_path, summary_path = eval_paths(out_dir, summary["benchmark"])
    records_path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(records_path, _lines(records))
    write_json_atomic(summary_path, summary)
    return records_path, summary_path


def _lines(records: Sequence[Mapping[str, Any]]) -> str:
    """Records as JSON lines."""
    return "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """The records of a `<bench>.jsonl` file, in file order (written whole: a line that does not
    parse is damage, `results.files.DamagedFileError`)."""
    return read_jsonl(path, appended=False)


def read_summary(path: str | Path) -> dict[str, Any]:
    """The summary of a `<bench>.summary.json` file."""
    return read_json(path)


class EvalStoreError(ValueError):
    """An evaluation that would overwrite a finished one of other settings (one-line message)."""


class EvalStore:
    """One benchmark's evaluation in a directory, written as it runs so that a kill loses nothing.

    Records stream into `<bench>.partial.jsonl` (its first line holds the evaluation's
    settings) as samples finish, synced to disk every `sync_every` records; `finish` writes the
    final `<bench>.jsonl` and `<bench>.summary.json` and removes the partial file. Started again
    with the same settings, an interrupted evaluation resumes where it stopped and a finished one
    is returned as it is; a finished evaluation of other settings is only replaced with
    `overwrite` (the settings: model, benchmark version, data hash, k, seed, sampling, limit).
    """

    def __init__(self, out_dir: str | Path, benchmark: str, overwrite: bool = False, sync_every: int = 32):
        self.records_path, self.summary_path = eval_paths(out_dir, benchmark)
        self.partial_path = self.records_path.with_name(f"{benchmark}.partial.jsonl")
        self.overwrite, self.sync_every = overwrite, sync_every
        self._file = None
        self._unsynced = 0

    def finished(self, settings: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
        """(records, summary) of a finished evaluation with these settings, None when there is
        none; EvalStoreError when one of other settings exists and `overwrite` is off."""
        if not (self.summary_path.exists() and self.records_path.exists()):
            return None
        summary = read_summary(self.summary_path)
        if summary.get("settings") == dict(settings):
            return read_records(self.records_path), summary
        if not self.overwrite:
            differ = sorted(k for k in settings if summary.get("settings", {}).get(k) != settings[k])
            raise EvalStoreError(
                f"{self.summary_path} holds a finished evaluation with other settings "
                f"({', '.join(differ) or 'none recorded'}); pass --overwrite to replace it, or another --out"
            )
        return None

    def resume(self, settings: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The records an interrupted evaluation with these settings already wrote (starting the
        partial file afresh when there is none or its settings differ); then open it for `add`."""
        done: list[dict[str, Any]] = []
        if self.partial_path.exists():
            rows = read_jsonl(self.partial_path, appended=True)  # a kill may tear its last line
            if rows and rows[0].get("settings") == dict(settings):
                done = rows[1:]
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.partial_path, _lines([{"settings": dict(settings)}, *done]))
        self._file = self.partial_path.open("a", encoding="utf-8")
        return done

    def add(self, record: Mapping[str, Any]) -> None:
        """Append one finished sample's record (synced every `sync_every` records)."""
        assert self._file is not None, "call resume() first"
        try:
            self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        except OSError as exc:  # a full disk: name the file
            raise named(exc, self.partial_path) from None
        self._unsynced += 1
        if self._unsynced >= self.sync_every:
            self._sync()

    def _sync(self) -> None:
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as exc:
            raise named(exc, self.partial_path) from None
        self._unsynced = 0

    def close(self) -> None:
        """Sync and close the partial file (kept: a later start with the same settings resumes it)."""
        if self._file is not None:
            self._sync()
            self._file.close()
            self._file = None

    def finish(self, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> tuple[Path, Path]:
        """Write the final record and summary files and remove the partial one."""
        self.close()
        paths = write_eval(self.records_path.parent, records, summary)
        self.partial_path.unlink(missing_ok=True)
        return paths
