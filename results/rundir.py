"""The run-directory contract: config.json, env.json, metrics.jsonl, checkpoints/, evals/,
summary.json. The training loop writes through `RunDir`; reports, comparisons and sweeps read
through it. Standard library only (no torch, nothing from `bench`), so reading results never
needs the runtime.

Writes are crash-safe: metrics lines are flushed and fsynced one by one, checkpoints are
written to a temporary directory and renamed into place, so a `kill -9` never leaves a
half-written checkpoint that `--resume` would pick up.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

CHECKPOINT_PREFIX = "step_"


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (e.g. --out of a non-empty directory)."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON to `path` through a temporary file and a rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
    os.replace(tmp, path)


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
        if run.path.exists() and any(run.path.iterdir()):
            raise RunDirError(
                f"--out {run.path} already exists and is not empty; use --resume {run.path} to continue it"
            )
        run.checkpoints.mkdir(parents=True, exist_ok=True)
        (run.path / "evals").mkdir(exist_ok=True)
        write_json_atomic(run.path / "config.json", config)
        write_json_atomic(run.path / "env.json", env)
        run.metrics_path.touch()
        return run

    def read_config(self) -> dict[str, Any]:
        """The resolved config this run was started with."""
        return json.loads((self.path / "config.json").read_text())

    def append_metrics(self, record: dict[str, Any]) -> None:
        """Append one step's metrics as a JSON line, durably (NaN/inf are written as null,
        so every line is strict JSON)."""
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(clean, default=float) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read_metrics(self) -> list[dict[str, Any]]:
        """All complete metric lines (a torn last line from a crash is ignored)."""
        if not self.metrics_path.exists():
            return []
        rows = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return rows

    def truncate_metrics(self, last_step: int) -> None:
        """Keep only metric lines with step <= last_step (resume: no gap, no duplicate)."""
        keep = [r for r in self.read_metrics() if r.get("step", 0) <= last_step]
        tmp = self.metrics_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r, default=float) + "\n" for r in keep))
        os.replace(tmp, self.metrics_path)

    def checkpoint_dir(self, step: int) -> Path:
        """Where the checkpoint of `step` lives."""
        return self.checkpoints / f"{CHECKPOINT_PREFIX}{step:06d}"

    def begin_checkpoint(self, step: int) -> Path:
        """A fresh temporary directory to write the checkpoint of `step` into."""
        tmp = self.checkpoints / f".tmp_{CHECKPOINT_PREFIX}{step:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit_checkpoint(self, tmp: Path, step: int, keep_last: int = 2) -> Path:
        """Atomically publish a checkpoint written with `begin_checkpoint`; prune all but the
        latest `keep_last` (0 = keep every one)."""
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

    def write_summary(self, summary: dict[str, Any]) -> None:
        """Write summary.json (final metrics, timing, counts)."""
        write_json_atomic(self.path / "summary.json", summary)
