"""Model FLOPs (`bench.models.flops`): a hand computation on a tiny config, and agreement with
`torch.utils.flop_counter.FlopCounterMode` on random Llama, Qwen2 and Qwen3 models.

FlopCounterMode counts the matmuls themselves (aten mm/addmm/bmm), so with eager attention, which
computes the full S x S scores as a bmm, it counts exactly what the DENSE convention counts: the
tolerance is zero. What it does not count, and neither do we: the embedding gather, norms, RoPE,
softmax, SiLU, residual adds, bias adds (the add of addmm). Under CPU's fused SDPA kernel it
would count no attention at all, hence `attn_implementation="eager"` here.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

from bench.models.critic import ValueModel, freeze_attention
from bench.models.flops import (
    AttentionCount,
    Head,
    backward_flops,
    forward_flops,
    generation_flops,
    mfu,
    peak_bf16_flops,
    train_step_flops,
)
from bench.models.shapes import decoder_shape

# 2 layers, hidden 8, 2 heads of 4, 1 KV head, MLP 12, vocabulary 10
HAND = LlamaConfig(
    vocab_size=10,
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    intermediate_size=12,
    head_dim=4,
)
# per layer: q 8x8 + k 8x4 + v 8x4 + o 8x8 = 192; MLP 3 x 8 x 12 = 288; body 2 x 480 = 960
# LM head 10 x 8 = 80; per (query, key) pair: 2 layers x 2 matmuls x 2 x 2 heads x 4 = 64


def test_a_forward_by_hand():
    # lengths 3 and 5: 8 tokens x 2 x (960 + 80) = 16,640; dense pairs 9 + 25 = 34 -> 34 x 64 = 2,176
    assert forward_flops(HAND, [3, 5]) == 16_640 + 2_176
    # causal pairs 3*4/2 + 5*6/2 = 21 -> 1,344
    assert forward_flops(HAND, [3, 5], attention=AttentionCount.CAUSAL) == 16_640 + 1_344
    # a critic: value head 8 x 1 instead of 80: 8 x 2 x 968 = 15,488
    assert forward_flops(HAND, [3, 5], head=Head.VALUE) == 15_488 + 2_176


def test_a_backward_and_a_training_step_by_hand():
    assert backward_flops(HAND, [3, 5]) == 2 * 18_816
    assert train_step_flops(HAND, [3, 5]) == 3 * 18_816
    # frozen attention: the projections (192 per layer) get no weight gradient: 2 x 2 x 192 x 8 fewer
    critic_fwd = 15_488 + 2_176
    assert backward_flops(HAND, [3, 5], head=Head.VALUE, frozen_attention=True) == 2 * critic_fwd - 6_144


def test_generation_by_hand():
    # prompt 3, 4 new tokens: 3 + 4 - 1 = 6 fed positions x 2 x 960 = 11,520; 4 head rows x 160 = 640;
    # prefill 3 x 3 pairs, decodes at positions 3, 4, 5 attend 4 + 5 + 6 keys: 24 x 64 = 1,536
    assert generation_flops(HAND, [3], [4]) == 11_520 + 640 + 1_536
    # causal prefill: 6 pairs instead of 9
    assert generation_flops(HAND, [3], [4], attention=AttentionCount.CAUSAL) == 11_520 + 640 + 21 * 64
    # one new token: the prefill alone; none: no forward at all
    assert generation_flops(HAND, [3, 2], [1, 0]) == 3 * 1_920 + 160 + 9 * 64


def _small(kind: str):
    """Random small models: GQA (kv heads < heads), a head_dim unlike hidden / heads for Qwen3."""
    common = dict(vocab_size=97, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    config = {
        "llama": LlamaConfig(hidden_size=48, intermediate_size=80, **common),
        "qwen2": Qwen2Config(hidden_size=48, intermediate_size=80, **common),
        "qwen3": Qwen3Config(
            hidden_size=48, intermediate_size=80, head_dim=20, tie_word_embeddings=True, **common
        ),
    }[kind]
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation="eager")


def _counted(fn) -> int:
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_policy_flops_equal_flop_counter_mode(kind):
    model = _small(kind)
    batches = [torch.randint(0, 97, (2, 11)), torch.randint(0, 97, (1, 5))]
    outputs = []
    forward = _counted(lambda: outputs.extend(model(input_ids=ids).logits for ids in batches))
    backward = _counted(lambda: sum(o.float().square().mean() for o in outputs).backward())
    lengths = [11, 11, 5]
    assert forward == forward_flops(model, lengths)
    assert backward == backward_flops(model, lengths)
    assert forward + backward == train_step_flops(model.config, lengths)


@pytest.mark.parametrize("frozen", [False, True])
def test_critic_flops_equal_flop_counter_mode(frozen):
    critic = ValueModel.from_policy(_small("qwen3"))
    if frozen:
        assert freeze_attention(critic) > 0
    ids = torch.randint(0, 97, (3, 9))
    values = []
    forward = _counted(
        lambda: values.append(critic.value_head(critic.backbone(input_ids=ids).last_hidden_state))
    )
    backward = _counted(lambda: values[0].square().mean().backward())
    assert forward == forward_flops(critic, [9] * 3, head=Head.VALUE)
    assert backward == backward_flops(critic, [9] * 3, head=Head.VALUE, frozen_attention=frozen)


@pytest.mark.parametrize("kind", ["llama", "qwen3"])
def test_generation_flops_equal_flop_counter_mode_on_hf_generate(kind):
    """HF `generate` with a KV cache (eager attention): prefill over the prompt (all P x P scores,
    the LM head at the last position only), then one position per further token."""
    model = _small(kind).eval()
    ids = torch.randint(3, 97, (1, 7))
    with torch.no_grad():
        counted = _counted(
            lambda: model.generate(
                ids, max_new_tokens=6, min_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None
            )
        )
    assert counted == generation_flops(model, [7], [6])


def test_a_shape_is_read_from_a_model_a_config_or_a_dict():
    model = _small("qwen3")
    shape = decoder_shape(model)
    assert decoder_shape(model.config) == shape == decoder_shape(model.config.to_dict())
    wrapped = torch.nn.Module()
    wrapped.module = model  # how DDP holds the model
    assert decoder_shape(wrapped) == shape
    assert shape.head_dim == 20 and shape.qk_norm and shape.tied_embeddings


def test_peak_flops_of_known_gpus_and_none_otherwise():
    assert peak_bf16_flops("NVIDIA H100 80GB HBM3") == 989e12
    assert peak_bf16_flops("NVIDIA H100 PCIe") == 756e12
    assert peak_bf16_flops("NVIDIA H200") == 989e12
    assert peak_bf16_flops("NVIDIA A100-SXM4-80GB") == 312e12
    assert peak_bf16_flops("NVIDIA GeForce RTX 4090") is None
    if not torch.cuda.is_available():
        assert peak_bf16_flops() is None
    # 494.5e12 model FLOPs in one second on one H100 SXM: half its peak
    assert mfu(494.5e12, 1.0, 989e12) == pytest.approx(0.5)
    assert mfu(494.5e12, 0.5, 989e12, gpus=2) == pytest.approx(0.5)
