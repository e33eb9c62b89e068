"""A reasoning-gym task from the command line: `bench run --task rg:<dataset>` with its config
trains a few steps, and `bench eval --bench rg:<dataset>` evaluates the checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("reasoning_gym")


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.mark.slow
def test_a_reasoning_gym_task_trains_and_evaluates(fresh_tiny, tmp_path):
    out = tmp_path / "run"
    done = bench(
        "run",
        "--algo",
        "grpo",
        "--task",
        "rg:basic_arithmetic",
        "--set",
        "task.max_terms=2",
        "--set",
        "task.max_digits=1",
        "--model",
        str(fresh_tiny),
        "--steps",
        "2",
        "--out",
        str(out),
        "--set",
        "trajectories_per_step=8",
        "--set",
        "max_new_tokens=12",
        "--set",
        "engine_slots=8",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    evaluated = bench(
        "eval",
        "--model",
        str(out),
        "--bench",
        "rg:basic_arithmetic",
        "--limit",
        "3",
        "--k",
        "1",
        "--max-new-tokens",
        "12",
        "--out",
        str(tmp_path / "ev"),
        "--no-progress",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    summary = json.loads((tmp_path / "ev" / "rg:basic_arithmetic.summary.json").read_text())
    assert summary["n_problems"] == 3
