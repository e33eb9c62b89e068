"""Which model a run trains: `tiny` resolves to the cached base checkpoint of the task (made by
`bench pretrain` on first use); anything else is a local directory or a hub id."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import RunConfig

# Default learning rates by model size. The paper's (1e-6 policy, 5e-6 critic) are for a 30B
# model; a model of a few million parameters (the embedded tiny one, or a test checkpoint)
# needs far larger steps to move within minutes on a CPU.
SMALL_MODEL_PARAMS = 20_000_000
SMALL_LRS = {"policy": 1e-4, "critic": 1e-3}
PAPER_LRS = {"policy": 1e-6, "critic": 5e-6}


def load_policy_for_run(config: RunConfig, task: Any, checkpoint: Path | None = None):
    """(policy model in train mode, tokenizer) for a run; `checkpoint` wins when resuming."""
    from bench.models import load_model_and_tokenizer
    from bench.pretrain import ensure_base_checkpoint

    if checkpoint is not None:
        source = str(checkpoint)
    elif config.model == "tiny":
        source = str(ensure_base_checkpoint(config.task, config.task_args))
        if note := task.tiny_model_note():
            print(f"bench: note: {note}")
    else:
        source = config.model
    model, tokenizer = load_model_and_tokenizer(source)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.train()
    return model, tokenizer


def resolve_learning_rates(config: RunConfig, algo: Any, policy: Any, task: Any) -> tuple[float, float]:
    """(policy LR, critic LR) of a run. Explicit config values win; then small models
    (< 20M parameters) get the task's `small_model_policy_lr` or else SMALL_LRS, and larger
    ones the paper's policy LR and the algorithm's critic LR. The policy LR never depends on
    the algorithm, so algorithms on one task are compared at the same rate."""
    small = sum(p.numel() for p in policy.parameters()) < SMALL_MODEL_PARAMS
    tier = SMALL_LRS if small else PAPER_LRS
    if config.policy_lr is not None:
        policy_lr = config.policy_lr
    elif small and task.small_model_policy_lr is not None:
        policy_lr = task.small_model_policy_lr
    else:
        policy_lr = tier["policy"]
    if config.critic_lr is not None:
        critic_lr = config.critic_lr
    elif small or algo.critic is None:
        critic_lr = tier["critic"]
    else:
        critic_lr = algo.critic.lr
    return policy_lr, critic_lr
