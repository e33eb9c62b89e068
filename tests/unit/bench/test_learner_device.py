"""Every tensor a learner step builds lives on the model's device: the real learner step of every
built-in algorithm, with its models on a second (fake) device (`tests/unit/bench/fake_device.py`),
fails at the first op where a loss input, a critic input or a reference log-prob sits on the
CPU beside a model output."""

from __future__ import annotations

import pytest
import torch

from algorithms import registry
from bench.models.tiny import new_tiny_model
from bench.train.distributed import Dist
from bench.train.learner import Learner, build_batch
from tests.unit.bench.fake_device import FAKE, DeviceMismatch, FakeDevice, on_fake
from tests.unit.bench.test_learner_old_logp import _trajectories

# (algorithm, config overrides, learner settings): every built-in; a KL term (the reference
# model) and the chunked and minibatched paths where they exist
CASES = [(name, {}, {}) for name in registry.BUILTINS] + [
    ("grpo", {"beta": 0.04}, {}),
    *[
        pytest.param(*case, marks=pytest.mark.slow)
        for case in [
            ("grpo", {"beta": 0.04}, {"chunk_tokens": 40, "minibatches": 2}),
            ("sao", {}, {"chunk_tokens": 40}),
            ("ppo", {}, {"minibatches": 2}),
        ]
    ],
]


def _learner(name: str, overrides: dict, settings: dict, policy) -> Learner:
    cls = registry.get(name)
    fields = cls.Config.__dataclass_fields__
    extra = {k: v for k, v in {"group_size": 4, "critic_warmup_steps": 0}.items() if k in fields}
    return Learner(
        cls(cls.Config(**extra, **overrides)),
        policy.train(),
        policy_lr=1e-3,
        critic_lr=1e-3,
        dist=Dist(device=FAKE),
        **settings,
    )


@pytest.mark.parametrize(("name", "overrides", "settings"), CASES)
def test_a_learner_step_keeps_every_tensor_on_the_model_device(name, overrides, settings):
    torch.manual_seed(0)
    policy, tokenizer = new_tiny_model(0)  # on the CPU, as loaded
    batch = build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6)  # built on the CPU
    with FakeDevice():
        learner = _learner(name, overrides, settings, policy)
        models = [learner.policy, learner.critic, learner.ref]
        for model in filter(None, models):
            assert all(on_fake(p) for p in model.parameters()), type(model).__name__
        for _ in range(2):  # the second step runs on optimizer state the first one made
            metrics = learner.train_step(batch)
        assert learner.version == 2 and all(on_fake(t) for _, t in learner.full_policy_state())
    assert metrics["policy/warmup"] == 0.0 and torch.isfinite(torch.tensor(metrics["policy/grad_norm"]))


def test_the_fake_device_raises_where_cuda_would():
    with FakeDevice():
        x = torch.ones(3).to(FAKE)
        assert on_fake(x) and x.device == FAKE and not on_fake(x.cpu())
        assert on_fake(x * 2) and on_fake(x * torch.tensor(2.0))  # a CPU scalar mixes freely
        assert on_fake(torch.zeros(3, device=x.device) + x)
        assert on_fake(x[torch.tensor([0, 2])])  # CPU indices, as CUDA takes them
        with pytest.raises(DeviceMismatch, match=r"CPU tensor\(s\) \(3,\) meet tensors on cuda:0"):
            x * torch.ones(3)
        with pytest.raises(DeviceMismatch):
            torch.cat([x, torch.ones(3)])
        model = torch.nn.Linear(3, 2).to(FAKE)
        assert on_fake(model(x)) and on_fake(model.weight)
        model(x).sum().backward()
        assert on_fake(model.weight.grad)
        with pytest.raises(DeviceMismatch):
            model(torch.ones(3))
