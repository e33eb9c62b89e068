"""The critic (value model) built from the policy, and the frozen-attention helper."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModel

from bench.models.loading import DTYPE_KW
from bench.models.packing import PackedBatch


def _backbone_of(policy: nn.Module) -> nn.Module:
    """The transformer without the LM head: `.model` (Llama-like), else base_model / get_decoder();
    of a peft model, that of its (adapter-wrapped) base model (`bench.models.lora`)."""
    if hasattr(policy, "peft_config"):
        policy = policy.get_base_model()
    inner = getattr(policy, "model", None)
    if isinstance(inner, nn.Module):
        return inner
    base = getattr(policy, "base_model", None)
    if isinstance(base, nn.Module) and base is not policy:
        return base
    if hasattr(policy, "get_decoder"):
        return policy.get_decoder()
    raise TypeError(f"cannot find the transformer backbone of {type(policy).__name__}")


class ValueModel(nn.Module):
    """The critic: a copy of the policy's backbone plus a scalar value head.

    `value_head` is zero-initialised (weight and bias), so every value is exactly 0 before the
    first critic update: the first advantages are then plain returns instead of returns minus
    noise from a random head, and the critic starts from a known baseline.
    """

    def __init__(self, backbone: nn.Module, hidden_size: int) -> None:
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_policy(cls, policy: nn.Module) -> ValueModel:
        """A critic whose backbone is a deep copy of the policy's (the policy is untouched)."""
        backbone = copy.deepcopy(_backbone_of(policy))
        value_model = cls(backbone, int(policy.config.hidden_size))
        dtype = next(backbone.parameters()).dtype
        return value_model.to(device=next(backbone.parameters()).device, dtype=dtype)

    def forward(self, batch: PackedBatch) -> torch.Tensor:
        """Same as `forward_values` (so wrappers such as DDP can call the module)."""
        return self.forward_values(batch)

    def forward_values(self, batch: PackedBatch) -> torch.Tensor:
        """values_B_T: column t is read at position P-1+t, the state before response token t.

        This is the same alignment as `response_logprobs`: V(s_t) is computed from the
        context that token t is sampled from. Zero on padding.
        """
        device = self.value_head.weight.device
        batch = batch.to(device)
        P, T = batch.prompt_len, batch.response_len
        out = self.backbone(
            input_ids=batch.input_ids_B_L,
            attention_mask=batch.attention_mask_B_L,
            position_ids=batch.position_ids_B_L,
            use_cache=False,
        )
        hidden_B_T_H = out.last_hidden_state[:, P - 1 : P - 1 + T]  # [B, T, hidden]
        values_B_T = self.value_head(hidden_B_T_H.to(self.value_head.weight.dtype)).squeeze(-1).float()
        return torch.where(batch.response_mask_B_T > 0, values_B_T, torch.zeros((), device=device))

    def save_pretrained(self, directory: str | os.PathLike) -> None:
        """Backbone in transformers format plus `value_head.safetensors`."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.backbone.save_pretrained(directory)
        head = {k: v.detach().cpu().contiguous() for k, v in self.value_head.state_dict().items()}
        save_file(head, str(directory / "value_head.safetensors"))

    @classmethod
    def load(cls, directory: str | os.PathLike) -> ValueModel:
        """The inverse of `save_pretrained` (on CPU, in the saved dtype)."""
        from safetensors.torch import load_file

        directory = Path(directory)
        backbone = AutoModel.from_pretrained(directory, local_files_only=True, **{DTYPE_KW: "auto"})
        value_model = cls(backbone, int(backbone.config.hidden_size))
        head = load_file(str(directory / "value_head.safetensors"))
        value_model.value_head.to(head["weight"].dtype).load_state_dict(head)
        return value_model


def freeze_attention(model: nn.Module) -> int:
    """Freeze every parameter inside an attention module; return how many scalars were frozen.

    An attention module is one whose attribute name is `self_attn`/`attn`/`attention`/
    `self_attention` or whose class name contains "Attention". Names are matched per module,
    not as substrings of parameter names, so e.g. `post_attention_layernorm` stays trainable.
    Used for SAO's frozen-attention critic.
    """
    names = {"self_attn", "attn", "attention", "self_attention"}
    frozen: dict[int, nn.Parameter] = {}
    for name, module in model.named_modules():
        if name.rsplit(".", 1)[-1] in names or "Attention" in type(module).__name__:
            for param in module.parameters():
                frozen[id(param)] = param
    for param in frozen.values():
        param.requires_grad_(False)
    return sum(p.numel() for p in frozen.values())
