"""LoRA (bench/models/lora.py): a LoRA learner trains only adapter weights (every base weight
bit-identical after steps, the critic's trunk too), the engine's merged weights equal peft's own
merge, and target modules that match nothing are refused with the valid names."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from algorithms import registry
from bench.models import lora
from bench.models.tiny import new_tiny_model
from bench.train.learner import Learner, build_batch
from tests.unit.bench.test_learner_old_logp import _trajectories

pytest.importorskip("peft")


def settings(rank: int = 4, targets: str = "all-linear") -> SimpleNamespace:
    return SimpleNamespace(lora_rank=rank, lora_alpha=8.0, lora_dropout=0.0, lora_target_modules=targets)


def lora_learner(algo: str = "sao", **algo_config) -> tuple[Learner, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    policy, _ = new_tiny_model(0)
    base = {k: v.clone() for k, v in policy.state_dict().items()}
    cls = registry.get(algo)
    learner = Learner(
        cls(cls.Config(**algo_config)),
        lora.apply(policy.train(), settings()),
        policy_lr=1e-2,
        critic_lr=1e-2,
    )
    return learner, base


def test_a_lora_learner_trains_only_adapters_and_the_critic_its_own():
    learner, base = lora_learner("ppo")  # a critic, and a policy that moves from step 1
    _, tokenizer = new_tiny_model(0)
    critic_trunk = {
        n: p.clone() for n, p in learner.unwrapped_critic.named_parameters() if not p.requires_grad
    }
    adapters = {n: p.clone() for n, p in learner.unwrapped_policy.named_parameters() if p.requires_grad}
    assert adapters and all(".lora_" in n for n in adapters)
    for _ in range(2):
        learner.train_step(build_batch(_trajectories(tokenizer), tokenizer.pad_token_id, 6))
    merged = lora.engine_weights(learner.unwrapped_policy)
    untouched = {
        k: v for k, v in learner.unwrapped_policy.get_base_model().state_dict().items() if ".lora_" not in k
    }
    for key, value in untouched.items():
        assert torch.equal(value, base[key.replace(".base_layer.", ".")]), key  # bit-identical
    moved = [
        n
        for n, p in learner.unwrapped_policy.named_parameters()
        if p.requires_grad and not torch.equal(p, adapters[n])
    ]
    assert moved, "no adapter weight changed"
    assert any(not torch.equal(merged[k], base[k]) for k in base)  # the engine sees the update
    for name, p in learner.unwrapped_critic.named_parameters():
        if name in critic_trunk:
            assert torch.equal(p, critic_trunk[name]), name
    trainable = [n for n, p in learner.unwrapped_critic.named_parameters() if p.requires_grad]
    assert "value_head.weight" in trainable and any(".lora_" in n for n in trainable)


def test_engine_weights_equal_peft_merge_and_load_into_the_plain_model():
    learner, _ = lora_learner("grpo")
    with torch.no_grad():
        for n, p in learner.unwrapped_policy.named_parameters():
            if ".lora_B" in n:
                p.normal_()  # nonzero adapters, so the merge matters
    expected = lora.engine_model(learner.unwrapped_policy).state_dict()
    import copy

    reference = copy.deepcopy(learner.unwrapped_policy).merge_and_unload().state_dict()
    assert expected.keys() == reference.keys()
    for key in expected:
        torch.testing.assert_close(expected[key], reference[key], rtol=0, atol=1e-6)


def test_target_modules_that_match_nothing_name_the_valid_ones():
    policy, _ = new_tiny_model(0)
    lora.check_targets(policy, "q_proj,v_proj")
    with pytest.raises(ValueError) as info:
        lora.check_targets(policy, "q_proj,query")
    message = str(info.value)
    assert "lora_target_modules: query match(es) no layer" in message
    assert "valid: all-linear or some of down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj" in message


@pytest.mark.parametrize(
    ("layers", "world_size", "needle"),
    [
        ({"precision": "bf16-mixed"}, 1, "precision=fp32 only, got bf16-mixed"),
        ({}, 2, "launched on 2 ranks"),
    ],
)
def test_lora_on_a_sharded_learner_is_refused_in_one_line(layers, world_size, needle):
    from bench.config import RunConfig
    from bench.config_checks import check_lora_unsharded
    from bench.errors import UsageError

    config = RunConfig(algo="grpo", task="arith", lora_rank=4, **layers)
    with pytest.raises(UsageError, match=needle):
        check_lora_unsharded(config, world_size)
    check_lora_unsharded(RunConfig(algo="grpo", task="arith", **layers), world_size)  # no LoRA: fine
