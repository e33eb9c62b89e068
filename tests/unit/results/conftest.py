"""Fixtures of the report tests: synthetic run directories (`synthetic_runs`), no model trained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .synthetic_runs import write_comparison, write_drift_run, write_jsonl


@pytest.fixture(scope="module")
def synthetic_dirs(tmp_path_factory) -> list[Path]:
    """A 3-arm x 2-seed comparison plus two plain drift runs (SAO and running-mean)."""
    root = tmp_path_factory.mktemp("synthetic")
    return [
        write_comparison(root / "cmp"),
        write_drift_run(root / "drift-sao", "sao"),
        write_drift_run(root / "drift-rm", "running-mean", "online"),
    ]


@pytest.fixture(scope="module")
def bare_dir(tmp_path_factory) -> Path:
    """A comparison whose runs log only a reward: no evaluation, critic, clipping, drift or timeline."""
    out = tmp_path_factory.mktemp("bare") / "cmp"
    write_comparison(out, arms=("grpo",), seeds=(0,), steps=5, eval_every=100, timeline=False)
    path = out / "runs" / "grpo-s0" / "metrics.jsonl"
    rows = [
        {"step": r["step"], "reward/mean": r.get("reward/mean", 0.0)} for r in map(json.loads, path.open())
    ]
    write_jsonl(path, rows)
    return out
