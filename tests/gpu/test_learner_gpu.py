"""The learner on a CUDA GPU (`gpu` marker: skipped without one; `scripts/gpu_check.sh` runs
them): a bf16-mixed step of every algorithm, FSDP2 over a world of one with a distributed
checkpoint round trip, exact weight pushes into the torch engine, and a 30-step arith run.

Not yet run on a GPU (written on a CPU-only machine; their CPU twins are the tests in
tests/unit/bench/test_learner_*.py and tests/integration/test_learner_ranks.py).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch

from algorithms import registry
from bench.models.tiny import new_tiny_model
from bench.train.learner import Learner, build_batch
from tests.unit.bench.test_learner_old_logp import _trajectories

pytestmark = pytest.mark.gpu


def _learner(name: str, **settings) -> tuple[Learner, object]:
    cls = registry.get(name)
    fields = cls.Config.__dataclass_fields__
    extra = {k: v for k, v in {"group_size": 4, "critic_warmup_steps": 0}.items() if k in fields}
    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)
    learner = Learner(cls(cls.Config(**extra)), policy.train(), policy_lr=1e-3, critic_lr=1e-3, **settings)
    return learner, tokenizer


@pytest.mark.parametrize("name", list(registry.BUILTINS))
def test_a_bf16_mixed_step_of_every_algorithm_on_cuda(name):
    learner, tokenizer = _learner(name, precision="bf16-mixed", activation_checkpointing=True)
    assert learner.models.sharded and learner.dist.device.type == "cuda"
    metrics = learner.train_step(build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6))
    assert learner.version == 1 and math.isfinite(metrics["policy/grad_norm"])
    assert all(math.isfinite(v) for k, v in metrics.items() if k.startswith(("loss/", "policy/", "value/")))
    assert {p.device.type for p in learner.policy.parameters()} == {"cuda"}


def test_fsdp2_world_of_one_saves_and_restores_on_cuda(tmp_path):
    from bench.train.checkpoints import restore_learner, save_checkpoint
    from results.rundir import RunDir

    learner, tokenizer = _learner("sao", precision="bf16-mixed")
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    learner.train_step(batch)
    run = RunDir.create(tmp_path / "run", {}, {})
    checkpoint = save_checkpoint(run, learner, tokenizer, 1)
    saved = {k: v.clone() for k, v in learner.full_policy_state()}
    other, _ = _learner("sao", precision="bf16-mixed")
    restore_learner(other, checkpoint)
    for key, value in other.full_policy_state():
        assert torch.equal(value, saved[key]), key
    assert other.train_step(batch)["policy/grad_norm"] == pytest.approx(
        learner.train_step(batch)["policy/grad_norm"], rel=1e-5
    )


def test_weight_pushes_into_the_torch_engine_are_exact():
    from bench.engines import make_engine
    from bench.train.models import unsharded_policy_copy

    learner, tokenizer = _learner("grpo", precision="bf16-mixed")
    engine = make_engine("torch", unsharded_policy_copy(learner.models), tokenizer, max_batch_size=8)
    try:
        learner.train_step(build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6))
        pushed = dict(learner.full_policy_state())
        engine.update_weights(pushed, learner.version)
        for key, value in engine.model.state_dict().items():
            assert value.device.type == "cuda" and torch.equal(value, pushed[key]), key
    finally:
        engine.close()


def test_thirty_steps_of_arith_on_cuda(tmp_path):
    from bench.config import build_run
    from bench.train.loop import train
    from bench.train.start import start_run

    layer = {
        "algo": "grpo",
        "task": "arith",
        "steps": 30,
        "mode": "sync",
        "precision": "bf16-mixed",
        "checkpoint_every": 0,
    }
    parts = build_run(layer)
    run = start_run(parts, tmp_path / "run", progress=False)
    summary = train(parts, run, progress=False)
    metrics = run.read_metrics()
    assert summary["outcome"] == "finished" and [m["step"] for m in metrics] == list(range(1, 31))
    assert all(math.isfinite(m["loss/policy"]) for m in metrics)
    rewards = [m["reward/mean"] for m in metrics]
    record = {
        "steps": len(metrics),
        "wall_s": summary["wall_s"],
        "reward_first5": sum(rewards[:5]) / 5,
        "reward_last5": sum(rewards[-5:]) / 5,
        "logp_mismatch_mean": sum(m.get("policy/logp_mismatch_mean", 0.0) for m in metrics) / len(metrics),
    }
    if os.environ.get("GPU_CHECK_OUT"):  # scripts/gpu_check.sh puts this in its JSON
        Path(os.environ["GPU_CHECK_OUT"], "arith_run.json").write_text(json.dumps(record))
