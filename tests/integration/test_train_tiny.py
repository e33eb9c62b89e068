"""A few steps of every algorithm in the real loop: finite losses, every trainable parameter
moves, critics train (with frozen attention where configured), async staleness bounded."""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from algorithms import registry
from bench.config import build_run
from bench.train.checkpoints import load_critic
from bench.train.loop import train
from bench.train.start import start_run
from results.rundir import RunDir
from tests.integration.conftest import TASK_ARGS


@functools.cache
def _has_critic(algo: str) -> bool:
    return registry.get(algo)().critic is not None


def _config(algo: str, base, **extra):
    fields = {f.name for f in dataclasses.fields(registry.get(algo).Config)}
    algo_args = {"critic_warmup_steps": 0} if "critic_warmup_steps" in fields else {}
    # critic_lr only where there is a critic: for an algorithm without one it is refused
    critic = {"critic_lr": 1e-3} if _has_critic(algo) else {}
    layer = {
        "algo": algo,
        "model": str(base),
        "steps": 2,
        "trajectories_per_step": 16,
        "mode": "sync",
        "checkpoint_every": 0,
        "max_new_tokens": 48,
        "engine_slots": 16,
        "policy_lr": 1e-3,
        **critic,
        "task_args": dict(TASK_ARGS),
        "algo_args": algo_args,
    }
    layer.update(extra)
    return build_run(layer)


def _run(config, tmp_path):
    run = start_run(config, tmp_path / "run", progress=False)
    summary = train(config, run, progress=False)
    return run, summary


def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize("algo", list(registry.BUILTINS))
def test_two_steps_move_every_parameter(algo, base_checkpoint, tmp_path):
    config = _config(algo, base_checkpoint)
    run, summary = _run(config, tmp_path)
    metrics = run.read_metrics()
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        assert math.isfinite(m["loss/policy"]) and m["loss/nonfinite_skipped"] == 0
        assert 0.0 <= m["reward/mean"] <= 1.0 and m["staleness/max"] == 0  # sync: never stale
    before = _params(AutoModelForCausalLM.from_pretrained(base_checkpoint))
    after = _params(AutoModelForCausalLM.from_pretrained(run.checkpoint_dir(2) / "policy"))
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert not unchanged, f"{algo}: parameters that did not move: {unchanged}"
    if registry.get(algo)().critic is not None:
        _check_critic(run, before, frozen=registry.get(algo)().critic.freeze_attention)
        assert math.isfinite(metrics[-1]["value/loss"]) and "value/grad_norm" in metrics[-1]


def _check_critic(run: RunDir, policy_before: dict[str, torch.Tensor], frozen: bool) -> None:
    critic = load_critic(run.checkpoint_dir(2))
    assert critic.value_head.weight.abs().sum() > 0  # the zero-initialised head learned
    for name, param in critic.backbone.named_parameters():
        start = policy_before[f"model.{name}"]
        if frozen and "self_attn" in name:
            assert torch.equal(param, start), f"frozen attention parameter moved: {name}"
        else:
            assert not torch.equal(param, start), f"critic parameter did not move: {name}"


def test_async_run_overlaps_and_bounds_staleness(base_checkpoint, tmp_path):
    config = _config("sao", base_checkpoint, mode="async", steps=4, max_staleness=1)
    run, _ = _run(config, tmp_path)
    metrics = run.read_metrics()
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert all(m["staleness/max"] <= 1 for m in metrics)
    assert max(m["staleness/mean"] for m in metrics) > 0  # rollouts did overlap policy updates
    assert metrics[-1]["policy/version"] == 4


def test_critic_warmup_keeps_policy_frozen(base_checkpoint, tmp_path):
    config = _config("sao", base_checkpoint, algo_args={"critic_warmup_steps": 2})
    run, summary = _run(config, tmp_path)
    assert [m["policy/warmup"] for m in run.read_metrics()] == [1.0, 1.0]
    assert summary["policy_version"] == 0
    before = _params(AutoModelForCausalLM.from_pretrained(base_checkpoint))
    after = _params(AutoModelForCausalLM.from_pretrained(run.checkpoint_dir(2) / "policy"))
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_in_training_evaluation_uses_the_eval_code_path(base_checkpoint, tmp_path):
    config = _config("grpo", base_checkpoint, eval_every=2, eval_bench="arith", eval_limit=4, eval_k=2)
    run, _ = _run(config, tmp_path)
    metrics = run.read_metrics()
    assert [m["step"] for m in metrics] == [0, 1, 2]  # step 0 = the base model, before any update
    for m in (metrics[0], metrics[2]):
        assert 0.0 <= m["eval/arith/avg_at_k"] <= 1.0 and "eval/arith/ci95_low" in m
    assert "eval/arith/avg_at_k" not in metrics[1]
    records = (run.path / "evals" / "step_000002" / "arith.jsonl").read_text().splitlines()
    assert len(records) == 8  # 4 problems x k=2
    assert (run.path / "evals" / "step_000000" / "arith.summary.json").is_file()


@pytest.mark.parametrize("algo", ["grpo", "sao"])
def test_drift_phases_last_the_same_trajectories_for_every_algorithm(algo, base_checkpoint, tmp_path):
    """The loop tells the task its group size: with 8-trajectory phases, GRPO's 2 problems
    (2 x 8 trajectories) and SAO's 16 problems both split into half phase 0, half phase 1."""
    config = _config(algo, base_checkpoint, task="drift", steps=1, task_args={**TASK_ARGS, "phase_every": 8})
    run, _ = _run(config, tmp_path)
    (metrics,) = run.read_metrics()
    assert metrics["drift/phase"] == 0.5


def test_a_resumed_drift_run_continues_the_phase_schedule(base_checkpoint, tmp_path):
    """16-trajectory phases, 16 trajectories per step: step 1 is phase 0, step 2 phase 1, also
    when step 2 runs in a resumed process (the schedule does not restart at phase 0)."""
    args = {"task": "drift", "task_args": {**TASK_ARGS, "phase_every": 16}, "checkpoint_every": 1}
    run, _ = _run(_config("grpo", base_checkpoint, steps=1, **args), tmp_path)
    train(
        _config("grpo", base_checkpoint, steps=2, **args), run, resume=run.latest_checkpoint(), progress=False
    )
    assert [(m["step"], m["drift/phase"]) for m in run.read_metrics()] == [(1, 0.0), (2, 1.0)]


def test_a_run_builds_its_algorithm_and_its_task_once(base_checkpoint, tmp_path, monkeypatch):
    """Validating the config, recording it in config.json and training all use the objects
    `build_run` made (before: the algorithm three times, the task twice)."""
    from envs import registry as task_registry

    _has_critic("grpo")  # the helper's own look at the algorithm, made before counting starts
    built = {"algorithm": 0, "task": 0}
    for key, cls in (("algorithm", registry.get("grpo")), ("task", task_registry.get("arith"))):

        @functools.wraps(cls.__init__)
        def counting(self, *args, _init=cls.__init__, _key=key, **kwargs):
            built[_key] += 1
            _init(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", counting)
    run, summary = _run(_config("grpo", base_checkpoint, steps=1), tmp_path)
    assert summary["outcome"] == "finished" and built == {"algorithm": 1, "task": 1}


def test_the_off_policy_regime_bf16_sampling_and_a_weight_sync_cadence(base_checkpoint, tmp_path):
    """engine_dtype=bfloat16 against the float32 learner, weights pushed every 3 policy versions:
    in sync mode step s trains on rollouts of version 3 * floor((s - 1) / 3), lags 0, 1, 2, 0, 1, 2
    (timeline.jsonl); at lag 0 the log-prob mismatch is the engine's numerics alone, far above
    a float32 engine's."""
    import json

    regime = {"engine_dtype": "bfloat16", "weight_sync_every": 3, "max_new_tokens": 16}
    run, _ = _run(_config("grpo", base_checkpoint, steps=6, **regime), tmp_path / "bf16")
    timeline = run.read_timeline()  # each trajectory's [start, finish, oldest, newest version, ...]
    lags = [{line["learner_version"] - v for t in line["trajs"] for v in t[2:4]} for line in timeline]
    assert lags == [{0}, {1}, {2}, {0}, {1}, {2}]
    metrics = run.read_metrics()
    assert [m["staleness/max"] for m in metrics] == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    config = json.loads((run.path / "config.json").read_text())
    assert (config["engine_dtype"], config["weight_sync_every"]) == ("bfloat16", 3)
    assert json.loads((run.path / "env.json").read_text())["engine"]["dtype"] == "torch.bfloat16"
    fp32, _ = _run(_config("grpo", base_checkpoint, steps=1, max_new_tokens=16), tmp_path / "fp32")
    (fresh,) = fp32.read_metrics()
    assert fresh["policy/logp_mismatch_max"] < 1e-4
    assert metrics[0]["policy/logp_mismatch_mean"] > 100 * fresh["policy/logp_mismatch_mean"]
    assert metrics[0]["policy/logp_mismatch_mean"] > 1e-4
