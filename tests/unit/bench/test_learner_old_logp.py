"""The learner's old-policy log-probs: with one minibatch they are the graded forward's own,
detached (no second forward); with several, later minibatches see the pre-step policy."""

from __future__ import annotations

import random

import pytest
import torch

from algorithms import registry
from bench.models.logprobs import response_logprobs
from bench.models.tiny import new_tiny_model
from bench.rollout.episode import Trajectory
from bench.train.learner import Learner, build_batch


def _trajectories(tokenizer, n: int = 8) -> list[Trajectory]:
    rng = random.Random(0)
    out = []
    for i in range(n):
        prompt = [tokenizer.bos_token_id] + tokenizer.encode(
            f"{i % 4 + 1}+{i % 3 + 2}=?\n", add_special_tokens=False
        )
        response = tokenizer.encode(
            "".join(rng.choice("0123456789\n") for _ in range(6)), add_special_tokens=False
        )
        out.append(
            Trajectory(
                prompt_key=f"p{i // 4}",
                group_id=i // 4,
                prompt_ids=prompt,
                response_ids=response,
                action_mask=[1] * len(response),
                rollout_logp=[-1.0] * len(response),
                versions=[0] * len(response),
                reward=float(i % 2),
            )
        )
    return out


def _learner(minibatches: int, lr: float = 1e-2) -> tuple[Learner, object]:
    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)
    grpo = registry.get("grpo")
    learner = Learner(
        grpo(grpo.Config(group_size=4)),
        policy.train(),
        policy_lr=lr,
        critic_lr=lr,
        grad_clip=1.0,
        minibatches=minibatches,
        temperature=1.0,
        nan_patience=3,
    )
    return learner, tokenizer


def test_single_minibatch_uses_the_graded_forward_as_old_policy(monkeypatch):
    learner, tokenizer = _learner(minibatches=1)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    with torch.no_grad():
        expected_old = batch.rows.map(
            lambda packed: response_logprobs(learner.policy, packed, temperature=1.0)[0]
        )
    seen = {}
    original = learner.algo.policy_loss

    def spy(inputs):
        seen["old"] = inputs.old_logp_B_T
        seen["logp"] = inputs.logp_B_T
        return original(inputs)

    monkeypatch.setattr(learner.algo, "policy_loss", spy)
    calls = []
    monkeypatch.setattr(learner, "_no_grad_logp", lambda *a: calls.append(a) or pytest.fail("extra forward"))
    metrics = learner.train_step(batch)
    assert not calls  # no separate old-policy forward
    assert not seen["old"].requires_grad
    torch.testing.assert_close(seen["old"], expected_old, rtol=0, atol=1e-6)
    assert metrics["policy/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["policy/approx_kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics["policy/clip_frac"] == 0.0


def test_several_minibatches_keep_the_pre_step_policy():
    learner, tokenizer = _learner(minibatches=2, lr=5e-2)
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)
    metrics = learner.train_step(batch)
    # the second minibatch is graded by updated weights against the pre-step policy: ratio != 1
    assert metrics["policy/approx_kl"] > 0.0
    assert learner.version == 1
