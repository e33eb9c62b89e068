"""Per-GPU memory of a learner, and of an engine colocated with it, by part: computed from a
decoder's shape (`bench.models.shapes`), never measured here (`bench plan` prints it; a GPU run
marks the parts it measured in docs/gpu.md).

The learner this describes is the GPU learner of the GPU issue: AdamW, FSDP2 full sharding of
parameters, gradients and optimizer state over `learner_gpus` (one GPU: nothing to shard), and
two precisions (`Precision`): fp32, and bf16-mixed, FSDP2's `MixedPrecisionPolicy` (bf16
compute, fp32 master weights, fp32 gradient reduction). Per parameter, per GPU, divided by the
GPU count: weights 4 bytes, gradients 4, AdamW's two moments 8 (16 in all, in both precisions:
mixed precision saves activation memory and time, not state), as in ZeRO (Rajbhandari et al.
2020) with fp32 master weights. On top of the sharded state:

- unsharded layers: FSDP2 all-gathers one decoder layer at a time (the next one prefetched) in
  the compute dtype, keeps the root module's parameters (embedding, untied LM head, final norm)
  gathered for the pass, and reduce-scatters a layer's gradient from an fp32 buffer. With one
  GPU in fp32 there is nothing to gather or cast: no such part.
- activations: what one forward over `chunk_tokens` padded tokens saves for its backward
  (`layer_activation_bytes`, checked against the tensors autograd saves in transformers' Llama,
  Qwen2 and Qwen3 in tests), plus the logits and their gradient; the larger of the policy's and
  the critic's (they run one after the other). Every token is counted as a response token with
  logits (an upper bound: prompts get none).
- reference (GRPO-family with a KL term): a frozen copy in the compute dtype, sharded.
- critic (SAO, PPO): the policy's backbone and a value head, with its own gradients and AdamW
  state except for frozen parameters (SAO's frozen attention: weights only).
- a colocated engine, as vLLM allocates: `engine_memory_utilization` of the GPU for its weights
  (compute dtype) and a KV cache filling the rest.
- the CUDA runtime: a fixed allowance (`CUDA_ALLOWANCE_BYTES`) for the context, NCCL buffers
  and allocator fragmentation, until a GPU run measures it.

Mixture-of-experts models hold and train every expert (state counts all of them); a token's
activations count its `experts_per_token` experts (not measured: transformers' fused experts
may save differently).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bench.models.flops import Head
from bench.models.shapes import DecoderShape

GIB = 1 << 30
CUDA_ALLOWANCE_BYTES = 1 * GIB
"""The CUDA context, NCCL buffers and allocator fragmentation: an allowance, not derived."""


class Precision(StrEnum):
    """The learner's numerics."""

    FP32 = "fp32"
    BF16_MIXED = "bf16-mixed"  # bf16 compute; fp32 master weights, gradients and reductions


class Part(StrEnum):
    """A part of the per-GPU memory, in the order `bench plan` lists them."""

    WEIGHTS = "weights"
    GRADS = "grads"
    OPTIMIZER = "optimizer"
    UNSHARDED_LAYERS = "unsharded_layers"
    ACTIVATIONS = "activations"
    REFERENCE = "reference"
    CRITIC = "critic"
    ENGINE_WEIGHTS = "engine_weights"
    ENGINE_KV_CACHE = "engine_kv_cache"
    CUDA = "cuda"


def compute_bytes(precision: Precision) -> int:
    """Bytes of one element in the compute dtype (fp32 4, bf16 2)."""
    return 4 if precision == Precision.FP32 else 2


# ---- activations -----------------------------------------------------------------------------------
def layer_activation_bytes(shape: DecoderShape, precision: Precision, moe: bool = False) -> int:
    """Bytes one token leaves saved for backward in one decoder layer (HF implementation, SDPA).

    Every RMSNorm keeps its float32 input (a copy in bf16), the normalised float32 values, its
    output in the compute dtype (the next matmul's input) and a float32 1/rms per row:
    n (4 + 2c) + 4 bytes; Qwen3's q/k norms n (4 + c) + 4 per head (RoPE keeps only cos and sin). Attention keeps q, k, v after RoPE and its
    output (GQA: k and v at kv_heads) and a float32 log-sum-exp per head; the gated MLP its gate
    and up outputs, SiLU(gate) and the product: 4 x intermediate. An MoE layer: router
    probabilities (float32) and, per routed expert, its input copy and the 4 MLP vectors.
    """
    c = compute_bytes(precision)
    q, kv = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    out = 2 * (shape.hidden * (4 + 2 * c) + 4)  # input and post-attention norms
    out += (q + kv) * (4 + c) + 4 * (shape.heads + shape.kv_heads) if shape.qk_norm else 0
    out += (2 * q + 2 * kv) * c + 4 * shape.heads
    if moe:
        return (
            out
            + 4 * shape.experts
            + shape.experts_per_token * (4 * shape.expert_intermediate + shape.hidden) * c
        )
    return out + 4 * shape.intermediate * c


def activation_bytes(
    shape: DecoderShape, tokens: int, precision: Precision, checkpointing: bool, head: Head = Head.LM
) -> int:
    """Peak activation bytes of one forward and backward over `tokens` padded tokens.

    Without checkpointing every layer keeps `layer_activation_bytes`; with per-layer activation
    checkpointing a layer keeps only its input (hidden x c) and one layer's activations exist
    again while it is recomputed in backward. On top: RoPE's cos and sin (shared by the layers),
    the final norm, and for the LM head the logits (vocab x c, kept for backward) plus their
    gradient in backward; a value head keeps its hidden-sized input. Left out: token ids,
    targets, masks and per-token log-sum-exps (~20 bytes a token).
    """
    c = compute_bytes(precision)
    per_layer = [layer_activation_bytes(shape, precision)] * shape.dense_layers
    per_layer += [layer_activation_bytes(shape, precision, moe=True)] * shape.moe_layers
    if checkpointing:
        layers = shape.layers * shape.hidden * c + max(per_layer)
    else:
        layers = sum(per_layer)
    head_bytes = 2 * shape.vocab * c if head == Head.LM else shape.hidden * c
    rope = 2 * shape.head_dim * c
    return tokens * (layers + rope + shape.hidden * (4 + 2 * c) + 4 + head_bytes)


# ---- the plan --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerSetup:
    """What the per-GPU memory depends on besides the model's shape."""

    precision: Precision = Precision.FP32
    learner_gpus: int = 1
    activation_checkpointing: bool = False
    chunk_tokens: int = 8192
    critic: bool = False
    critic_frozen_attention: bool = False
    reference: bool = False
    engine_memory_utilization: float = 0.0  # a colocated engine's share of the GPU; 0: on its own GPUs
    gpu_bytes: int = 80 * GIB


@dataclass(frozen=True)
class MemoryPart:
    """One row of the estimate: bytes per GPU and how they were computed."""

    part: Part
    bytes: int
    how: str


def _largest_layer_params(shape: DecoderShape) -> int:
    """Parameters of the largest decoder layer (an MoE layer holds all its experts)."""
    mlp = shape.dense_mlp_params() if shape.dense_layers else 0
    if shape.moe_layers:
        mlp = max(mlp, shape.experts * shape.expert_params() + shape.router_params())
    return shape.attention_params() + mlp + 2 * shape.hidden


def _unsharded_bytes(shape: DecoderShape, setup: LearnerSetup) -> int:
    sharded, c = setup.learner_gpus > 1, compute_bytes(setup.precision)
    if not sharded and setup.precision == Precision.FP32:
        return 0
    root = shape.vocab * shape.hidden * (1 if shape.tied_embeddings else 2) + shape.hidden
    layer = _largest_layer_params(shape)
    return (root + 2 * layer) * c + (layer * 4 if sharded else 0)


def _critic_bytes(shape: DecoderShape, setup: LearnerSetup) -> int:
    params = shape.backbone_params() + shape.hidden + 1  # backbone + value head
    trainable = params - (shape.attention_params_total() if setup.critic_frozen_attention else 0)
    return (4 * params + 12 * trainable) // setup.learner_gpus


def estimate(shape: DecoderShape, setup: LearnerSetup) -> list[MemoryPart]:
    """The per-GPU bytes of every part that applies to `setup` (see the module docstring)."""
    n, c, params = setup.learner_gpus, compute_bytes(setup.precision), shape.parameters()
    policy_act = activation_bytes(shape, setup.chunk_tokens, setup.precision, setup.activation_checkpointing)
    critic_act = activation_bytes(
        shape, setup.chunk_tokens, setup.precision, setup.activation_checkpointing, Head.VALUE
    )
    ckpt = "with" if setup.activation_checkpointing else "without"
    parts = [
        MemoryPart(Part.WEIGHTS, 4 * params // n, f"{params:,} parameters x 4 bytes (fp32) / {n} GPUs"),
        MemoryPart(Part.GRADS, 4 * params // n, f"x 4 bytes (fp32) / {n} GPUs"),
        MemoryPart(Part.OPTIMIZER, 8 * params // n, f"AdamW moments, x 8 bytes / {n} GPUs"),
        MemoryPart(
            Part.UNSHARDED_LAYERS,
            _unsharded_bytes(shape, setup),
            "FSDP2: embedding/LM head and 2 layers gathered in the compute dtype, 1 layer's fp32 gradient",
        ),
        MemoryPart(
            Part.ACTIVATIONS,
            max(policy_act, critic_act if setup.critic else 0),
            f"{setup.chunk_tokens:,} tokens per forward/backward, {ckpt} activation checkpointing",
        ),
    ]
    if setup.reference:
        parts.append(MemoryPart(Part.REFERENCE, params * c // n, f"frozen copy, x {c} bytes / {n} GPUs"))
    if setup.critic:
        frozen = "attention frozen (weights only)" if setup.critic_frozen_attention else "all trainable"
        how = f"backbone + value head, 16 bytes per trainable parameter, {frozen}, / {n} GPUs"
        parts.append(MemoryPart(Part.CRITIC, _critic_bytes(shape, setup), how))
    if setup.engine_memory_utilization > 0:
        share = int(setup.engine_memory_utilization * setup.gpu_bytes)
        weights = params * c
        kv = max(0, share - weights)
        held = kv // shape.kv_bytes_per_token(c)
        parts.append(MemoryPart(Part.ENGINE_WEIGHTS, weights, f"x {c} bytes (the learner's compute dtype)"))
        parts.append(
            MemoryPart(
                Part.ENGINE_KV_CACHE,
                kv,
                f"the rest of {setup.engine_memory_utilization:g} of the GPU: {held:,} tokens of K/V",
            )
        )
    parts.append(MemoryPart(Part.CUDA, CUDA_ALLOWANCE_BYTES, "context, NCCL, fragmentation: an allowance"))
    return parts


def total_bytes(parts: list[MemoryPart]) -> int:
    """The per-GPU total of an estimate."""
    return sum(p.bytes for p in parts)
