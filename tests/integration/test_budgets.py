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


def _arith_prompt_tokens(base) -> int:
    """Tokens of a two-operand arith prompt (`d+d=?` or `d-d=?`: all the same length)."""
    from bench.models.chat import render_prompt
    from bench.models.loading import load_model_and_tokenizer

    _, tokenizer = load_model_and_tokenizer(str(base))
    return len(render_prompt(tokenizer, [{"role": "user", "content": "7+5=?\n"}]))


def test_the_flops_of_a_two_step_run_by_hand_and_a_flops_budget(base_checkpoint, tmp_path):
    # SAO, sync, 8 trajectories per step of exactly 4 new tokens after a prompt of P tokens, no
    # warmup: each step generates 8 x (P, 4), trains the policy on 8 sequences of P + 4 tokens
    # and its frozen-attention critic twice on them
    from bench.models import flops as F
    from bench.models.shapes import decoder_shape

    out = tmp_path / "run"
    common = _common(base_checkpoint)
    common[common.index("max_new_tokens=48")] = "max_new_tokens=4"
    args = ["--algo", "sao", "--mode", "sync", "--steps", "2", "--set", "algo.critic_warmup_steps=0"]
    res = bench("run", *args, "--out", str(out), *common)
    assert res.returncode == 0, res.stderr
    lines = _lines(out)
    assert [r["rollout/tokens"] for r in lines] == [32.0, 32.0]  # every response hit its 4 tokens
    shape = decoder_shape(json.loads((base_checkpoint / "config.json").read_text()))
    P = _arith_prompt_tokens(base_checkpoint)
    lengths = [P + 4] * 8
    generation = F.generation_flops(shape, [P] * 8, [4] * 8)
    policy = F.train_step_flops(shape, lengths)
    critic = 2 * F.train_step_flops(shape, lengths, head=F.Head.VALUE, frozen_attention=True)
    for r in lines:
        assert (r["budget/step_generation_flops"], r["budget/step_policy_flops"]) == (generation, policy)
        assert r["budget/step_critic_flops"] == critic
        assert r["budget/step_flops"] == generation + policy + critic
    assert [r["budget/flops"] for r in lines] == [(generation + policy + critic) * s for s in (1, 2)]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["consumption"]["flops"] == 2 * (generation + policy + critic)
    assert summary["consumption"]["critic_flops"] == 2 * critic
    saved = json.loads((out / "checkpoints" / "step_000002" / "consumption.json").read_text())
    assert saved["flops"] == summary["consumption"]["flops"]

    # a resume continues the count; a FLOPs budget (in scientific notation) stops at its first step past it
    step = generation + policy + critic
    res = bench("run", "--resume", str(out), "--set", f"max_flops={3.5 * step:.6e}", "--set", "steps=100")
    assert res.returncode == 0, res.stderr
    flops = [r["budget/flops"] for r in _lines(out)]
    assert len(flops) == 4 and flops[2] > flops[1] and flops[2] < 3.5 * step <= flops[3]
    assert json.loads((out / "summary.json").read_text())["stopped_by"] == "flops"
