"""Model FLOPs of the passes a run makes: learner forward and backward, a critic's, and generation
with a KV cache; and the peak bf16 FLOP/s of known GPUs, for model-FLOPs utilisation (MFU).

The convention is the MFU literature's (PaLM, Chowdhery et al. 2022, appendix B; torchtitan's and
prime-rl's `get_num_flop_per_token`): only matrix multiplications count, 2 FLOPs per
multiply-add, and a backward pass costs twice its forward (the gradients with respect to the
inputs and to the weights are one matmul each). Per token of a forward pass:

- 2 x the matmul parameters it passes through: q/k/v/o projections, the gated MLP (for MoE
  layers the router and the `experts_per_token` experts it is routed to, not all experts), and
  the head: the LM head (vocab x hidden; counted whether or not it is tied to the embedding, as
  PaLM, Chinchilla's appendix F and prime-rl count the final logits), or for a critic the value
  head (hidden x 1);
- the attention term: per layer, q.k scores and the probability-weighted sum of v, 2 matmuls of
  2 x heads x head_dim FLOPs per (query, key) pair. `AttentionCount.DENSE` (the default, PaLM's
  `12 L H Q T` per token of a training step) counts every query against all S keys of its
  sequence, ignoring that a causal mask needs only the prefix ("we follow the convention and do
  not account for sparsity in causal attention", torchtitan); `CAUSAL` counts each query against
  its prefix (itself included), S(S+1)/2 pairs: the work a causal kernel cannot skip.

A run's passes: rollouts `generation_flops`; a learner step `train_step_flops` (plus a
`forward_flops` for each no-grad pass: old-policy log-probs, a reference model's); a critic update
`train_step_flops(..., head=Head.VALUE)`, with `frozen_attention` for SAO's critic.

Not counted: the embedding lookup (a gather), norms, RoPE, softmax, activations, residual adds
and the loss (elementwise, O(hidden) per token against O(hidden^2)); optimizer updates; work
repeated by activation checkpointing (it is not model work: MFU divides the model's FLOPs by
time, so recomputation lowers it). Lengths are real tokens: padding is not model work either.

`torch.utils.flop_counter.FlopCounterMode` counts the same matmuls (aten mm/addmm/bmm/baddbmm
and the CUDA attention kernels, never causal sparsity), so on a model run with eager attention
its totals equal these exactly (tests/unit/bench/test_flops.py); it does not count CPU's fused
attention kernel (`_scaled_dot_product_flash_attention_for_cpu`), which would drop the attention
term there.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from bench.models.shapes import DecoderShape, decoder_shape


class AttentionCount(StrEnum):
    """How many (query, key) pairs the attention term of a full-sequence pass counts."""

    DENSE = "dense"  # S^2 per sequence: the MFU convention (PaLM, torchtitan, prime-rl)
    CAUSAL = "causal"  # S (S + 1) / 2: each query against its prefix, itself included


class Head(StrEnum):
    """What sits on top of the decoder layers."""

    LM = "lm"  # the policy: logits over the vocabulary
    VALUE = "value"  # a critic (`bench.models.critic.ValueModel`): one scalar per token


def _shape(model_or_config: Any) -> DecoderShape:
    return model_or_config if isinstance(model_or_config, DecoderShape) else decoder_shape(model_or_config)


def _head_params(shape: DecoderShape, head: Head) -> int:
    return shape.lm_head_params() if head == Head.LM else shape.hidden


def _pairs(length: int, attention: AttentionCount) -> int:
    return length * length if attention == AttentionCount.DENSE else length * (length + 1) // 2


def _attention_flops_per_pair(shape: DecoderShape) -> int:
    """FLOPs of one (query, key) pair in every layer: scores and weighted values, 2 x 2 x H x d each."""
    return shape.layers * 4 * shape.heads * shape.head_dim


def forward_flops(
    model_or_config: Any,
    lengths: Sequence[int],
    head: Head = Head.LM,
    attention: AttentionCount = AttentionCount.DENSE,
) -> int:
    """Model FLOPs of one forward pass over sequences of `lengths` real tokens (each attends only
    within itself); `model_or_config`: a model, critic, HF config, config.json dict or DecoderShape."""
    shape = _shape(model_or_config)
    tokens = sum(lengths)
    matmul = 2 * (shape.body_matmul_params_per_token() + _head_params(shape, head)) * tokens
    return matmul + _attention_flops_per_pair(shape) * sum(_pairs(n, attention) for n in lengths)


def backward_flops(
    model_or_config: Any,
    lengths: Sequence[int],
    head: Head = Head.LM,
    attention: AttentionCount = AttentionCount.DENSE,
    frozen_attention: bool = False,
) -> int:
    """Model FLOPs of the backward pass of `forward_flops`: 2x the forward (gradients with respect
    to inputs and to weights). With `frozen_attention` (SAO's critic) the q/k/v/o projections get
    no weight gradient, only the input gradient the layers below need: 1x their forward."""
    shape = _shape(model_or_config)
    flops = 2 * forward_flops(shape, lengths, head, attention)
    if frozen_attention:
        flops -= 2 * shape.layers * shape.attention_params() * sum(lengths)
    return flops


def train_step_flops(
    model_or_config: Any,
    lengths: Sequence[int],
    head: Head = Head.LM,
    attention: AttentionCount = AttentionCount.DENSE,
    frozen_attention: bool = False,
) -> int:
    """Model FLOPs of one forward and backward pass over sequences of `lengths` (a learner step of
    the policy, or with `head=Head.VALUE` one critic update); activation recomputation excluded."""
    return forward_flops(model_or_config, lengths, head, attention) + backward_flops(
        model_or_config, lengths, head, attention, frozen_attention
    )


def generation_flops(
    model_or_config: Any,
    prompt_lengths: Sequence[int],
    new_tokens: Sequence[int],
    attention: AttentionCount = AttentionCount.DENSE,
) -> int:
    """Model FLOPs of generating `new_tokens[i]` tokens after prompt i with a KV cache, as the torch
    engine and vLLM do: one prefill forward over the prompt (`attention` convention; the LM head
    only at its last token, which gives the first new token), then one decode forward per further
    token, whose query attends to every cached position and itself (pos + 1 keys at position pos).
    The last sampled token is never fed back, so n new tokens take P + n - 1 fed positions and n
    LM-head rows; a request with n = 0 runs no forward."""
    shape = _shape(model_or_config)
    body, head = 2 * shape.body_matmul_params_per_token(), 2 * shape.lm_head_params()
    per_pair = _attention_flops_per_pair(shape)
    total = 0
    for prompt, n in zip(prompt_lengths, new_tokens, strict=True):
        if n <= 0:
            continue
        decode_keys = sum(range(prompt + 1, prompt + n))  # positions P .. P+n-2 attend pos + 1 keys
        total += body * (prompt + n - 1) + head * n + per_pair * (_pairs(prompt, attention) + decode_keys)
    return total


# ---- peak FLOP/s and MFU ---------------------------------------------------------------------------
_PEAK_BF16_DENSE = (
    # (substring of torch.cuda.get_device_name(), dense bf16 tensor-core FLOP/s); the first match
    # wins, so variants come before their family. NVIDIA's datasheets list these with sparsity
    # (2x); the dense figures are half: H100 SXM 1979 -> 989 TFLOP/s, PCIe 1513 -> 756, NVL 1671
    # -> 835; H200 SXM as H100 SXM, H200 NVL as H100 NVL; A100 (SXM and PCIe) 312 dense.
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H200 NVL", 835e12),
    ("H100", 989e12),  # "NVIDIA H100 80GB HBM3" (SXM)
    ("H200", 989e12),  # "NVIDIA H200" (SXM); also matches "GH200" (Grace Hopper: the same GPU)
    ("A100", 312e12),
)


def peak_bf16_flops(device_name: str | None = None) -> float | None:
    """Peak dense bf16 FLOP/s of a known GPU, by a substring of its name (default: CUDA device 0's
    `torch.cuda.get_device_name()`); None for an unknown GPU or when there is no CUDA device."""
    if device_name is None:
        import torch

        if not torch.cuda.is_available():
            return None
        device_name = torch.cuda.get_device_name()
    return next((peak for key, peak in _PEAK_BF16_DENSE if key in device_name), None)


def mfu(model_flops: float, seconds: float, peak_flops_per_s: float, gpus: int = 1) -> float:
    """Model-FLOPs utilisation: model FLOPs done per second over what `gpus` GPUs could do at peak."""
    return model_flops / (seconds * peak_flops_per_s * gpus)
