"""A reasoning-gym task from the command line: `bench run --task rg:<dataset>` with its config
trains a few steps, and `bench eval` evaluates the checkpoint on that config's held-out problems
(`rg:<dataset>@field=value...`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("reasoning_gym")

CONFIGURED = "rg:basic_arithmetic@max_digits=1@max_terms=2"
"""The benchmark of the run's config (its held-out problems, not the default config's)."""


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
        "--eval-every",
        "2",
        "--eval-bench",
        CONFIGURED,
        "--eval-limit",
        "2",
        "--set",
        "eval_k=1",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "reward/mean" in m] == [1, 2]
    assert any(f"eval/{CONFIGURED}/avg_at_k" in m for m in metrics), metrics[-1].keys()
    evaluated = bench(
        "eval",
        "--model",
        str(out),
        "--bench",
        CONFIGURED,
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
    summary = json.loads((tmp_path / "ev" / f"{CONFIGURED}.summary.json").read_text())
    assert summary["n_problems"] == 3
