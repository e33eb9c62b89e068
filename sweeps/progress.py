"""The live view of a comparison or a sweep while its workers run (`bench compare`, `bench sweep`).

Everything is read from the experiment's directory, never from log lines: the spec
(comparison.json / sweep.json), each run's status record (`status/`), its run directory's
metrics.jsonl (last line: step, reward, the budget's count) and summary.json (how it ended),
and a finished run's final evaluation. A run is queued (no status yet, or claimed on a cluster
and waiting for a node: `where` says what it asks for), running (`where`: its node and GPUs) (step, budget
spent, reward), interrupted (recorded running by a worker of this host that is gone, e.g. a
killed command's: taken over and resumed later), evaluating, finished (its score), stopped or
failed (the reason); a sweep's trial is queued, running (its current seed's run), complete (its
value), pruned or failed.

On a terminal the view is a table redrawn in place every poll; elsewhere (a log file, a pipe) it
is one line per event: a run that starts, finishes (with its score) or fails (with its reason).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from results.budgets import budget_of
from results.experiments import FINAL_EVAL_DIR, RUNS_DIR, STATUS_DIR, arm_slug, seed_run_name, trial_slot
from results.rundir import RunDir
from results.tables import format_table
from sweeps.queue import is_dead_here

COLUMNS = ["run", "state", "progress", "reward", "result"]
WHERE = "where"
"""the column of the node and GPUs a cluster placed a run on, shown when a run has one"""


@dataclass(frozen=True)
class RunRow:
    """One run (or trial) of the live view."""

    run: str
    state: str
    progress: str = ""
    reward: str = ""
    result: str = ""
    where: str = ""


def last_metrics(path: Path) -> dict[str, Any]:
    """The last complete line of a metrics.jsonl (read from its end: files grow long), {} if none."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 65536))
            tail = f.read().decode(errors="replace")
    except OSError:
        return {}
    for line in reversed(tail.splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return {}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def budget_progress(metrics: dict[str, Any], budget: dict[str, Any]) -> str:
    """'step 12, trajectories 384/1024 (38%)' from a run's last metrics line and the budget."""
    if not metrics:
        return "starting"
    text = f"step {int(metrics.get('step', 0))}"
    try:
        row = budget_of(budget["kind"])
    except (KeyError, TypeError):
        return text
    count = metrics.get(f"budget/{row.counts}")
    if count is None:
        return text
    limit = float(budget["amount"]) * row.scale
    value, total = float(count) / row.scale, float(budget["amount"])
    shown = f"{value:,.0f}/{total:,.0f}" if row.whole else f"{value:.1f}/{total:g}"
    return f"{text}, {row.kind} {shown} ({min(1.0, float(count) / limit):.0%})"


def _reward(metrics: dict[str, Any]) -> str:
    value = metrics.get("reward/mean")
    return "" if value is None else f"{value:.3f}"


def comparison_rows(out: Path, spec: dict[str, Any]) -> list[RunRow]:
    """Every (arm, seed) run of a comparison directory, in the spec's order."""
    benches = spec.get("eval", {}).get("benchmarks", [])
    rows = []
    for arm in spec["arms"]:
        for seed in spec["seeds"]:
            name = seed_run_name(arm_slug(arm["name"]), seed)
            rows.append(_run_row(out, name, out / RUNS_DIR / name, spec.get("budget", {}), benches))
    return rows


def _run_row(out: Path, name: str, run_dir: Path, budget: dict, benches: list[str]) -> RunRow:
    status = _read(out / STATUS_DIR / f"{name}.json")
    if status is None:
        return RunRow(name, "queued")
    return dataclasses.replace(_state_row(status, name, run_dir, budget, benches), where=_where(status))


def _where(status: dict[str, Any]) -> str:
    """Where a cluster placed the run, or what it waits for ('asks 1 CPU, 2 GPU')."""
    if status.get("where"):
        return str(status["where"])
    return f"asks {status['asks']}" if status.get("asks") else ""


def _state_row(status: dict[str, Any], name: str, run_dir: Path, budget: dict, benches: list[str]) -> RunRow:
    state = str(status.get("state"))
    metrics = last_metrics(run_dir / "metrics.jsonl")
    if state == "running":
        if is_dead_here(str(status.get("worker", ""))):  # its command was killed: resumed when taken over
            why = "its worker is gone: it resumes from its last checkpoint when a worker takes it over"
            return RunRow(name, "interrupted", budget_progress(metrics, budget), _reward(metrics), why)
        end = RunDir(run_dir).read_outcome() if (run_dir / "summary.json").exists() else None
        if end is not None and str(end.outcome) == "finished":
            return RunRow(name, "evaluating", budget_progress(metrics, budget), _reward(metrics))
        return RunRow(name, "running", budget_progress(metrics, budget), _reward(metrics))
    if state == "failed":
        return RunRow(
            name, "failed", budget_progress(metrics, budget), _reward(metrics), str(status.get("detail", ""))
        )
    return RunRow(name, state, budget_progress(metrics, budget), _reward(metrics), _scores(run_dir, benches))


def _scores(run_dir: Path, benches: list[str]) -> str:
    """'arith 62.5%' for each benchmark its final evaluation has."""
    parts = []
    for bench in benches:
        summary = _read(run_dir / "evals" / FINAL_EVAL_DIR / f"{bench}.summary.json")
        if summary is not None and summary.get("avg_at_k") is not None:
            parts.append(f"{bench} {100 * summary['avg_at_k']:.1f}%")
    return ", ".join(parts)


def sweep_rows(out: Path, spec: dict[str, Any]) -> list[RunRow]:
    """Every trial slot of every arm of a sweep directory: its state and its latest seed's run."""
    rows = []
    for arm in spec["arms"]:
        slug = arm_slug(arm["name"])
        for slot in range(int(spec.get("trials", 0))):
            name = trial_slot(slot)
            status = _read(out / STATUS_DIR / slug / f"{name}.json")
            label = f"{arm['name']}/{name}"
            if status is None:
                rows.append(RunRow(label, "queued"))
                continue
            runs = sorted(
                (out / slug).glob(f"{seed_run_name(name, '*')}/metrics.jsonl"),
                key=lambda p: p.stat().st_mtime,
            )
            metrics = last_metrics(runs[-1]) if runs else {}
            state = str(status.get("state"))
            result = (
                f"{status['value']:.4g}" if status.get("value") is not None else str(status.get("detail", ""))
            )
            progress = budget_progress(metrics, spec.get("budget", {})) if runs else ""
            if runs and state == "running":
                progress = f"{runs[-1].parent.name.rpartition('-')[2]}: {progress}"
            result = "" if state in ("running", "queued") else result
            rows.append(RunRow(label, state, progress, _reward(metrics), result, _where(status)))
    return rows


def read_rows(out: Path) -> list[RunRow]:
    """The live view's rows of a comparison or sweep directory (none before its spec exists)."""
    spec = _read(out / "comparison.json")
    if spec is not None:
        return comparison_rows(out, spec)
    spec = _read(out / "sweep.json")
    return sweep_rows(out, spec) if spec is not None else []


def event_line(row: RunRow) -> str:
    """One line for a run's new state (the view off a terminal)."""
    stamp = time.strftime("%H:%M:%S")
    detail = (
        row.result if row.state in ("failed", "finished", "stopped", "complete", "pruned") else row.progress
    )
    where = f" ({row.where})" if row.where else ""
    return f"[{stamp}] {row.run}: {row.state}" + (f": {detail}" if detail else "") + where


def summary_line(rows: list[RunRow]) -> str:
    """'9 runs: 3 finished, 2 running, 4 queued'."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    return f"{len(rows)} runs: " + ", ".join(f"{n} {state}" for state, n in counts.items())


class LiveView:
    """The live view of one experiment directory (module docstring); `poll` after each wait."""

    def __init__(self, out: Path, stream: TextIO | None = None, table: bool | None = None) -> None:
        self.out, self.stream = Path(out), stream or sys.stdout
        self.table = self.stream.isatty() if table is None else table
        self.states: dict[str, str] = {}
        self.drawn = 0

    def poll(self) -> list[RunRow]:
        """Read the directory and show what changed (a redrawn table, or one line per event)."""
        rows = read_rows(self.out)
        if self.table:
            self._draw(rows)
        else:
            for row in rows:
                if self.states.get(row.run, "queued") != row.state:
                    print(event_line(row), file=self.stream, flush=True)
        self.states = {row.run: row.state for row in rows}
        return rows

    def _draw(self, rows: list[RunRow]) -> None:
        """Redraw the table in place (move up over the previous drawing, clear to the end)."""
        width = max(40, _terminal_width() - 1)
        columns = COLUMNS + ([WHERE] if any(r.where for r in rows) else [])
        text = format_table([vars(r) for r in rows], columns) + "\n" + summary_line(rows)
        lines = [line[:width] for line in text.splitlines()]
        up = f"\x1b[{self.drawn}F" if self.drawn else ""
        self.stream.write(up + "\x1b[J" + "\n".join(lines) + "\n")
        self.stream.flush()
        self.drawn = len(lines)


def _terminal_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 120
