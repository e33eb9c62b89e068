"""Placing the learner's models: device, precision, activation checkpointing and FSDP2 sharding.

- fp32 in one process: plain modules on the device (the CPU default; nothing else changes).
- Otherwise (several ranks, or bf16-mixed) every model is sharded with torch's FSDP2
  (`fully_shard`): each decoder layer (the classes the HF model lists in `_no_split_modules`)
  is its own unit, then the root (embedding, final norm, LM or value head). Under bf16-mixed,
  `MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)`: the parameters (master
  weights), their gradients and the optimizer state stay float32, each unit's forward and
  backward run on a bfloat16 copy gathered for it, and gradients are reduced in float32.
  Log-probs, values and losses are computed in float32 from the bfloat16 logits and hidden
  states (`bench.models.logprobs`, `bench.models.critic`).
- Gradients are SUMMED over ranks, not averaged: every rank takes the gradient of the loss of
  the whole global batch through its own rows only (`bench.train.batch.GlobalRows`), so the
  sum is exactly the one-process gradient of that batch, for any plugin loss.
- A frozen parameter (SAO's frozen-attention critic, the reference model) is sharded with the
  others; FSDP2 keeps it out of the gradient reduction.
- Activation checkpointing: transformers' own, per decoder layer, non-reentrant (the layer's
  input is kept, its inside recomputed in backward); it runs inside each FSDP2 unit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import torch
from torch import nn

from bench.models.memory import Precision


def decoder_layers(model: nn.Module) -> list[nn.Module]:
    """The decoder layers of a transformers model (or a critic around one): the modules whose
    class the model names in `_no_split_modules`, in order."""
    names: set[str] = set()
    for module in model.modules():
        names.update(getattr(module, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def enable_activation_checkpointing(model: nn.Module) -> None:
    """Recompute each decoder layer in backward (transformers' per-layer checkpointing,
    non-reentrant) in every transformers model inside `model` (the policy, or a critic's backbone)."""
    from transformers import PreTrainedModel

    found = [m for m in model.modules() if isinstance(m, PreTrainedModel)]
    if not found:
        raise TypeError(f"activation checkpointing needs a transformers model, got {type(model).__name__}")
    model = found[0]
    if hasattr(model, "activation_checkpointing_enable"):  # transformers 5's name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def shard(model: nn.Module, precision: Precision) -> nn.Module:
    """Shard `model` in place with FSDP2 over the default process group (module docstring):
    each decoder layer, then the root; gradients summed over ranks in float32."""
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    if precision == Precision.BF16_MIXED:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    else:
        policy = MixedPrecisionPolicy()
    layers = decoder_layers(model)
    if not layers:
        raise TypeError(f"FSDP2: found no decoder layers in {type(model).__name__} (_no_split_modules)")
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(1.0)  # a sum (see the module docstring)
            module.set_force_sum_reduction_for_comms(True)  # gloo has no pre-multiplied sum
    return model


def is_sharded(model: nn.Module) -> bool:
    """Whether `model` is an FSDP2 module."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def full_state(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, full tensor) of every entry of `model.state_dict()`, transformers' names, on the
    model's device; tied entries (an embedding shared with the LM head) are one tensor. Sharded
    entries are gathered one at a time: a collective, so every rank must iterate it to the end,
    in step."""
    from torch.distributed.tensor import DTensor

    first_name: dict[int, str] = {}
    canonical = {
        name: first_name.setdefault(id(p), name) for name, p in model.named_parameters(remove_duplicate=False)
    }
    tied = {name for name, n in Counter(canonical.values()).items() if n > 1}
    kept: dict[str, torch.Tensor] = {}  # gathered tied weights, for their other names
    for name, tensor in model.state_dict().items():
        key = canonical.get(name, name)
        if key in kept:
            yield name, kept[key]
            continue
        full = tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
        if key in tied:
            kept[key] = full
        yield name, full


def gradient_sync(model: nn.Module, enabled: bool) -> None:
    """FSDP2: whether the next backward reduces gradients across ranks (off for all but the
    last of several chunked backwards, which accumulate locally); a plain module ignores it."""
    if is_sharded(model):
        model.set_requires_gradient_sync(enabled)
