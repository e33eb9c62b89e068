"""The learner's models, placed: the policy, the critic an algorithm trains beside it, and the
frozen reference a KL term compares against, each on this rank's device, in the run's
precision, checkpointed and sharded alike (`bench.train.sharding`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from algorithms.base import Algorithm
from bench.models import lora
from bench.models.critic import ValueModel, freeze_attention
from bench.models.memory import Precision
from bench.train.distributed import Dist, grouped_dist
from bench.train.sharding import enable_activation_checkpointing, full_state, shard


@dataclass
class LearnerModels:
    """The placed models of one learner."""

    policy: nn.Module
    critic: ValueModel | None
    ref: nn.Module | None  # a frozen copy of the initial policy, when the algorithm needs ref_logp
    frozen_critic_params: int  # scalars of the critic frozen by its settings (SAO: attention)
    dist: Dist  # the rank they live on (with a process group when sharded)
    sharded: bool  # FSDP2 modules (several ranks, or bf16-mixed)
    precision: Precision


def needs_sharding(precision: Precision, world_size: int) -> bool:
    """Whether the learner shards with FSDP2: several ranks, or bf16-mixed compute (whose one
    implementation is FSDP2's `MixedPrecisionPolicy`, a world of one included)."""
    return world_size > 1 or precision == Precision.BF16_MIXED


def place_models(
    algo: Algorithm, policy: nn.Module, precision: Precision, checkpointing: bool, dist: Dist
) -> LearnerModels:
    """Move `policy` to `dist.device`; copy the reference from it and build the critic from its
    backbone there (so all three share one device); then turn on activation checkpointing and
    shard, as the settings ask. Optimizers are built afterwards, on the placed parameters."""
    sharded = needs_sharding(precision, dist.world_size)
    if sharded and not dist.grouped:
        dist = grouped_dist()
    policy = policy.to(dist.device)
    ref = copy.deepcopy(policy).eval().requires_grad_(False) if "ref_logp" in algo.needs else None
    critic, frozen = None, 0
    if algo.critic is not None:
        critic = ValueModel.from_policy(policy)
        if algo.critic.freeze_attention:
            frozen = freeze_attention(critic)
    trained = [m for m in (policy, critic) if m is not None]
    if checkpointing:
        for model in trained:
            enable_activation_checkpointing(model)
    if sharded:
        for model in (*trained, *([ref] if ref is not None else [])):
            shard(model, precision)
    return LearnerModels(policy, critic, ref, frozen, dist, sharded, precision)


def unsharded_policy_copy(models: LearnerModels) -> nn.Module:
    """A plain (unsharded) copy of the policy's current weights, on the same device, in eval
    mode: what a colocated engine generates with. Sharded: a collective (`full_state`); a LoRA
    policy (never sharded, `bench.config_checks`): the base with merged weights."""
    if lora.is_lora(models.policy):  # LoRA hook: a plain (merged) copy
        return lora.engine_model(models.policy)
    if not models.sharded:
        return copy.deepcopy(models.policy).eval()
    from transformers import AutoModelForCausalLM

    from bench.models.loading import DTYPE_KW

    full = dict(full_state(models.policy))
    dtype = next(iter(full.values())).dtype
    with torch.device(models.dist.device):
        model = AutoModelForCausalLM.from_config(models.policy.config, **{DTYPE_KW: dtype})
    model.load_state_dict(full)
    model.generation_config = copy.deepcopy(models.policy.generation_config)
    return model.eval()
