"""What a run trains and at which rates: the policy it starts from (`tiny` resolves to the
task's cached base checkpoint), the learning rates, and the learner built from the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import RunConfig, make_algorithm

# Default learning rates by model size. The paper's (1e-6 policy, 5e-6 critic) are for a 30B
# model; a model of a few million parameters (the embedded tiny one, or a test checkpoint)
# needs far larger steps to move within minutes on a CPU.
SMALL_MODEL_PARAMS = 20_000_000
SMALL_LRS = {"policy": 1e-4, "critic": 1e-3}
PAPER_LRS = {"policy": 1e-6, "critic": 5e-6}


def policy_source(config: RunConfig, task: Any, checkpoint: Path | None = None) -> str:
    """What the policy is loaded from: `checkpoint` when resuming, the task's tiny base
    checkpoint for `tiny` (shipped, or made by `bench.train.start.start_run`), else the model spec."""
    if checkpoint is not None:
        return str(checkpoint)
    if config.model != "tiny":
        return config.model
    from bench.models.cache import existing_base

    path = existing_base(config.task, config.task_args)
    if path is None:
        raise RuntimeError(
            f"no tiny base checkpoint for {config.task}: start runs with bench.train.start_run"
        )
    if note := task.tiny_model_note():
        print(f"bench: note: {note}")
    return str(path)


def load_policy_for_run(config: RunConfig, task: Any, checkpoint: Path | None = None):
    """(policy model in train mode, tokenizer) for a run (`policy_source`)."""
    from bench.models.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(policy_source(config, task, checkpoint))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.train()
    return model, tokenizer


def resolve_learning_rates(config: RunConfig, algo: Any, policy: Any, task_name: str) -> tuple[float, float]:
    """(policy LR, critic LR) of a run. Explicit config values win; then small models
    (< 20M parameters) get the task's tiny-model rate (`bench.models.recipes`) or else
    SMALL_LRS, and larger ones the paper's (PAPER_LRS). Neither rate depends on the algorithm,
    so algorithms on one task are compared at the same rates."""
    from bench.models.recipes import recipe_for

    small = sum(p.numel() for p in policy.parameters()) < SMALL_MODEL_PARAMS
    tier = SMALL_LRS if small else PAPER_LRS
    if config.policy_lr is not None:
        policy_lr = config.policy_lr
    elif small and recipe_for(task_name).policy_lr is not None:
        policy_lr = recipe_for(task_name).policy_lr
    else:
        policy_lr = tier["policy"]
    critic_lr = config.critic_lr if config.critic_lr is not None else tier["critic"]
    return policy_lr, critic_lr


def make_learner(config: RunConfig, resume: Path | None = None):
    """(task, tokenizer, learner) of a run: the algorithm, the task, the policy and its critic,
    restored from checkpoint `resume` when given."""
    from bench.seeding import seed_everything
    from bench.train.checkpoints import restore_learner
    from bench.train.learner import Learner, make_accelerator
    from envs import registry as task_registry

    accelerator = make_accelerator()
    seed_everything(config.seed)  # same initial weights on every rank
    algo = make_algorithm(config)
    task = task_registry.make(config.task, **config.task_args)
    policy, tokenizer = load_policy_for_run(config, task, None if resume is None else resume / "policy")
    policy_lr, critic_lr = resolve_learning_rates(config, algo, policy, config.task)
    learner = Learner(
        algo,
        policy,
        policy_lr=policy_lr,
        critic_lr=critic_lr,
        grad_clip=config.grad_clip,
        minibatches=config.minibatches,
        temperature=config.temperature,
        nan_patience=config.nan_patience,
        accelerator=accelerator,
        chunk_tokens=config.learner_chunk_tokens,
    )
    if resume is not None:
        restore_learner(learner, resume)
    return task, tokenizer, learner
