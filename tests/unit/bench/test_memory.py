"""Memory arithmetic (`bench.models.memory`) against what torch really holds on CPU: the tensors
autograd saves for backward in transformers' Llama, Qwen2 and Qwen3 (fp32 and bf16, with and
without activation checkpointing), and the parameter, gradient and AdamW-state bytes after one
optimizer step of a policy and of a critic; and by hand against the GPU issue's own arithmetic."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from bench.models.critic import ValueModel, freeze_attention
from bench.models.flops import Head
from bench.models.logprobs import chunk_tokens_for, response_logprobs
from bench.models.memory import (
    CUDA_ALLOWANCE_BYTES,
    GIB,
    LearnerSetup,
    Part,
    Precision,
    activation_bytes,
    estimate,
    layer_activation_bytes,
    total_bytes,
)
from bench.models.packing import pack
from bench.models.shapes import decoder_shape, known_shape

DTYPES = {Precision.FP32: torch.float32, Precision.BF16_MIXED: torch.bfloat16}


def small_config(kind: str, layers: int):
    common = dict(vocab_size=300, hidden_size=64, intermediate_size=160, num_hidden_layers=layers)
    if kind == "qwen3":
        return Qwen3Config(num_attention_heads=4, num_key_value_heads=2, head_dim=24, **common)
    if kind == "qwen2":
        return Qwen2Config(num_attention_heads=8, num_key_value_heads=2, **common)
    return LlamaConfig(num_attention_heads=4, num_key_value_heads=2, **common)


def saved_bytes(model, forward) -> int:
    """Bytes of the distinct storages autograd saves during `forward()`, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def keep(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        forward()
    return sum(seen.values())


def model_of(kind: str, layers: int, precision: Precision, checkpointing: bool):
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(small_config(kind, layers)).to(DTYPES[precision]).train()
    if checkpointing:
        model.activation_checkpointing_enable()
    return model


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
@pytest.mark.parametrize("precision", list(Precision))
@pytest.mark.parametrize("checkpointing", [False, True], ids=["", "checkpointed"])
def test_a_layer_saves_what_the_estimate_says(kind, precision, checkpointing):
    """Per layer per token, from the difference between a 4-layer and a 2-layer model (no head)."""
    ids = torch.randint(0, 300, (3, 40))
    saved = {}
    for layers in (2, 4):
        model = model_of(kind, layers, precision, checkpointing)
        saved[layers] = saved_bytes(
            model, lambda m=model: m(input_ids=ids, use_cache=False, logits_to_keep=1)
        )
    per_layer_token = (saved[4] - saved[2]) / 2 / ids.numel()
    shape = decoder_shape(small_config(kind, 2))
    c = 4 if precision == Precision.FP32 else 2
    expected = shape.hidden * c if checkpointing else layer_activation_bytes(shape, precision)
    assert per_layer_token == expected


@pytest.mark.parametrize("precision", list(Precision))
def test_a_learner_forward_saves_what_the_estimate_says(precision):
    """A whole `response_logprobs` forward (logits for every token but the first prompt token),
    plus the logits' gradient that backward allocates, against `activation_bytes`. Left out by
    the estimate: targets, the response mask and the log-sum-exp (8 + 1 + 4 bytes per response
    token); counted by it but not there: the gradient of the first token's logits (no target)."""
    model = model_of("qwen3", 3, precision, False)
    B, T = 4, 47
    batch = pack([[1]] * B, [torch.randint(3, 300, (T,)).tolist() for _ in range(B)], 0)
    saved = saved_bytes(model, lambda: response_logprobs(model, batch))
    c = 4 if precision == Precision.FP32 else 2
    measured = saved + B * T * 300 * c  # + the gradient of the [B, T, V] logits
    estimated = activation_bytes(decoder_shape(model), B * (T + 1), precision, checkpointing=False)
    assert measured == pytest.approx(estimated, rel=2e-3)


def _state_bytes(module, optimizer) -> int:
    tensors = [p for p in module.parameters()] + [p.grad for p in module.parameters() if p.grad is not None]
    tensors += [s[k] for s in optimizer.state.values() for k in ("exp_avg", "exp_avg_sq")]
    return sum(t.numel() * t.element_size() for t in tensors)


def _one_adamw_step(module, loss_of) -> torch.optim.AdamW:
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-3)
    loss_of(module).backward()
    optimizer.step()
    return optimizer


def test_policy_state_after_one_adamw_step_is_16_bytes_per_parameter():
    model = model_of("qwen3", 2, Precision.FP32, False)
    ids = torch.randint(0, 300, (2, 9))
    optimizer = _one_adamw_step(model, lambda m: m(input_ids=ids).logits.float().square().mean())
    parts = {p.part: p.bytes for p in estimate(decoder_shape(model), LearnerSetup())}
    assert _state_bytes(model, optimizer) == parts[Part.WEIGHTS] + parts[Part.GRADS] + parts[Part.OPTIMIZER]


@pytest.mark.parametrize("frozen", [True, False])
def test_critic_state_after_one_adamw_step(frozen):
    policy = model_of("qwen3", 2, Precision.FP32, False)
    critic = ValueModel.from_policy(policy)
    if frozen:
        freeze_attention(critic)
    ids = torch.randint(0, 300, (2, 9))
    optimizer = _one_adamw_step(
        critic, lambda m: m.value_head(m.backbone(input_ids=ids).last_hidden_state).square().mean()
    )
    setup = LearnerSetup(critic=True, critic_frozen_attention=frozen)
    parts = {p.part: p.bytes for p in estimate(decoder_shape(policy), setup)}
    assert _state_bytes(critic, optimizer) == parts[Part.CRITIC]


def test_sharding_reference_and_unsharded_layers_by_hand():
    shape = decoder_shape(
        small_config("llama", 2)
    )  # 64 hidden, 4 heads of 16, 2 KV heads, MLP 160, vocab 300
    # per layer: q 64x64 + k, v 64x32 each + o 64x64 = 12,288; MLP 3 x 64 x 160 = 30,720; norms 128 -> 43,136
    # root: embedding 300 x 64 + LM head 300 x 64 (untied) + final norm 64 = 38,464; all: 2 x 43,136 + 38,464
    params = 124_736
    assert shape.parameters() == params
    setup = LearnerSetup(precision=Precision.BF16_MIXED, learner_gpus=4, reference=True, chunk_tokens=10)
    parts = {p.part: p.bytes for p in estimate(shape, setup)}
    assert parts[Part.WEIGHTS] == 4 * params // 4 and parts[Part.OPTIMIZER] == 8 * params // 4
    # 2 bf16 layers and the bf16 root gathered, 1 layer's fp32 gradient before its reduce-scatter
    assert parts[Part.UNSHARDED_LAYERS] == (38_464 + 2 * 43_136) * 2 + 43_136 * 4
    assert parts[Part.REFERENCE] == params * 2 // 4
    assert Part.CRITIC not in parts and parts[Part.CUDA] == CUDA_ALLOWANCE_BYTES
    one_gpu_fp32 = {p.part: p.bytes for p in estimate(shape, LearnerSetup(chunk_tokens=10))}
    assert one_gpu_fp32[Part.UNSHARDED_LAYERS] == 0 and Part.REFERENCE not in one_gpu_fp32


def test_a_colocated_engine_fills_its_share_with_kv_cache():
    shape = known_shape("qwen3-0.6b")
    setup = LearnerSetup(precision=Precision.BF16_MIXED, engine_memory_utilization=0.25, gpu_bytes=80 * GIB)
    parts = {p.part: p for p in estimate(shape, setup)}
    assert parts[Part.ENGINE_WEIGHTS].bytes == 596_049_920 * 2
    assert parts[Part.ENGINE_WEIGHTS].bytes + parts[Part.ENGINE_KV_CACHE].bytes == 20 * GIB
    # K and V of 28 layers x 8 KV heads x 128 in bf16: 114,688 bytes per token
    assert f"{(20 * GIB - 596_049_920 * 2) // 114_688:,} tokens" in parts[Part.ENGINE_KV_CACHE].how


def test_the_gpu_issue_arithmetic_for_qwen3_4b():
    """Issue 35: on today's fp32 learner with vLLM holding half of an 80 GB GPU, Qwen3-4B's Table 1
    recipe needs ~113 GB per GPU for GRPO and ~166 GB for SAO (a frozen-attention critic)."""
    shape = known_shape("qwen3-4b")
    tokens = chunk_tokens_for(shape.layers, shape.hidden, shape.intermediate, shape.vocab)  # a run's default
    grpo = LearnerSetup(engine_memory_utilization=0.5, chunk_tokens=tokens)
    sao = LearnerSetup(
        engine_memory_utilization=0.5, chunk_tokens=tokens, critic=True, critic_frozen_attention=True
    )
    by_hand_state = 16 * 4_022_468_096
    # critic: every parameter (tied embedding: the whole policy) + a 2,560 + 1 value head, 4 bytes
    # each; 12 more per trainable one, all but 36 layers x (26,214,400 projections + 256 q/k norm)
    critic_params = 4_022_468_096 + 2_561
    by_hand_critic = 4 * critic_params + 12 * (critic_params - 36 * 26_214_656)
    grpo_parts = {p.part: p.bytes for p in estimate(shape, grpo)}
    sao_parts = {p.part: p.bytes for p in estimate(shape, sao)}
    assert grpo_parts[Part.WEIGHTS] + grpo_parts[Part.GRADS] + grpo_parts[Part.OPTIMIZER] == by_hand_state
    assert sao_parts[Part.CRITIC] == by_hand_critic
    assert grpo_parts[Part.ACTIVATIONS] == pytest.approx(8 * GIB, rel=0.1)  # the learner's budget
    assert total_bytes(estimate(shape, grpo)) / 1e9 == pytest.approx(113, rel=0.05)
    assert total_bytes(estimate(shape, sao)) / 1e9 == pytest.approx(166, rel=0.05)


def test_checkpointing_keeps_layer_inputs_and_one_layer():
    shape = known_shape("qwen3-0.6b")
    plain = activation_bytes(shape, 1000, Precision.BF16_MIXED, False)
    ckpt = activation_bytes(shape, 1000, Precision.BF16_MIXED, True)
    layer = layer_activation_bytes(shape, Precision.BF16_MIXED)
    assert plain - ckpt == 1000 * (28 * layer - (28 * 1024 * 2 + layer))
    value = activation_bytes(shape, 1000, Precision.BF16_MIXED, False, Head.VALUE)
    assert plain - value == 1000 * (2 * 151_936 * 2 - 1024 * 2)  # logits and their gradient vs the head input
