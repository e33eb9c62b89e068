"""Matched budgets through `bench run`: a trajectory or token budget stops the run, the counts
are recorded per step and in summary.json, and a resume continues them."""

from __future__ import annotations

import json

import pytest

from tests.integration.test_cli_run import _common, bench

pytestmark = pytest.mark.slow


def _lines(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_a_trajectory_budget_stops_the_run_and_a_resume_extends_it(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    res = bench(
        "run",
        "--algo",
        "sao",
        "--mode",
        "sync",
        "--steps",
        "1000",
        "--out",
        str(out),
        *_common(base_checkpoint),
        "--set",
        "max_trajectories=20",
    )
    assert res.returncode == 0, res.stderr
    lines = _lines(out)
    assert [r["step"] for r in lines] == [1, 2, 3]  # 8 trajectories per step: 24 >= 20 after step 3
    assert [r["budget/trajectories"] for r in lines] == [8, 16, 24]
    assert all(r["budget/generated_tokens"] >= r["budget/trajectories"] for r in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "trajectories" and summary["consumption"]["trajectories"] == 24
    assert 0 < summary["consumption"]["critic_share_of_learner_time"] < 1  # SAO trains a critic
    timeline = [json.loads(line) for line in (out / "timeline.jsonl").read_text().splitlines()]
    assert [t["step"] for t in timeline] == [1, 2, 3] and all(len(t["trajs"]) >= 8 for t in timeline)
    start, finish, oldest, newest, tokens, used = timeline[0]["trajs"][0]
    assert start <= finish <= timeline[0]["consumed_at"] and used == 1 and oldest <= newest
    assert (out / "checkpoints" / "step_000003" / "consumption.json").exists()

    res = bench("run", "--resume", str(out), "--set", "max_trajectories=40", "--no-progress")
    assert res.returncode == 0, res.stderr
    assert [r["budget/trajectories"] for r in _lines(out)] == [8, 16, 24, 32, 40]


def test_a_token_budget_counts_generated_tokens(base_checkpoint, tmp_path):
    out = tmp_path / "run"
    res = bench(
        "run",
        "--algo",
        "grpo",
        "--mode",
        "async",
        "--steps",
        "1000",
        "--out",
        str(out),
        *_common(base_checkpoint),
        "--set",
        "max_tokens=300",
    )
    assert res.returncode == 0, res.stderr
    tokens = [r["budget/generated_tokens"] for r in _lines(out)]
    assert tokens[-1] >= 300 and all(t < 300 for t in tokens[:-1])  # the first step that reaches it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped_by"] == "tokens" and summary["consumption"]["critic_share_of_learner_time"] == 0
