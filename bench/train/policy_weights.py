"""Where every weight push reads the policy's weights: one function, so the sharded learner swaps
the source in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bench.models import lora


def policy_weights(learner: Any) -> Mapping[str, torch.Tensor]:
    """The policy's full (unsharded) weights by parameter name, as engines load them: the
    learner's `full_policy_state` (sharded parameters gathered whole on every rank, a collective),
    or for a LoRA policy its merged weights under the base model's names (`lora.engine_weights`;
    LoRA runs are never sharded, `bench.config_checks`). Every caller (the loop's engine start and
    its weight pushes) goes through here."""
    if lora.is_lora(learner.unwrapped_policy):  # LoRA hook: merged
        return lora.engine_weights(learner.unwrapped_policy)
    return dict(learner.full_policy_state())
