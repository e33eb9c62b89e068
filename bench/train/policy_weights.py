"""Where every weight push reads the policy's weights: one function, so the sharded learner swaps
the source in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bench.models import lora


def policy_weights(learner: Any) -> Mapping[str, torch.Tensor]:
    """The policy's full (unsharded) weights by parameter name, as engines load them.

    Today the learner's unwrapped module's `state_dict()` (DDP or one process: full tensors), or
    for a LoRA policy its merged weights under the base model's names (`lora.engine_weights`).
    The FSDP2 learner replaces this body with its method that yields (name, full tensor) on
    every rank; every caller (the loop's engine start and its weight pushes) goes through here."""
    return lora.engine_weights(learner.unwrapped_policy)  # LoRA hook: merged
