"""Checkpoint retention: a run keeps its latest `keep_checkpoints` checkpoints, or all with 0."""

import pytest

from bench.config import build_config
from bench.errors import UsageError
from results.rundir import RunDir


def _save_steps(run: RunDir, steps, keep_last):
    for step in steps:
        tmp = run.begin_checkpoint(step)
        (tmp / "learner.pt").write_text(str(step))
        run.commit_checkpoint(tmp, step, keep_last)
    return [p.name for p in run.list_checkpoints()]


def test_the_latest_are_kept_and_zero_keeps_all(tmp_path):
    assert _save_steps(RunDir(tmp_path / "a"), [100, 200, 300, 400], keep_last=2) == [
        "step_000300",
        "step_000400",
    ]
    assert _save_steps(RunDir(tmp_path / "b"), [100, 200, 300], keep_last=0) == [
        "step_000100",
        "step_000200",
        "step_000300",
    ]


def test_keep_checkpoints_is_a_config_field_that_rejects_negatives():
    assert build_config({"algo": "sao", "task": "arith"}).keep_checkpoints == 2
    assert build_config({"algo": "sao", "task": "arith", "keep_checkpoints": 0}).keep_checkpoints == 0
    with pytest.raises(UsageError, match="keep_checkpoints"):
        build_config({"algo": "sao", "task": "arith", "keep_checkpoints": -1})
