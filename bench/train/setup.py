"""What a run trains and at which rates: the policy it starts from (`tiny` resolves to the
task's cached base checkpoint), the learning rates, and the learner built from the run's parts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.config import RunConfig, RunParts
from bench.errors import UsageError

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


def template_needs(config: RunConfig, task: Any) -> list[str]:
    """The settings of a run that only a chat template can render (empty: none)."""
    needs = ["enable_thinking"] if config.enable_thinking is not None else []
    return needs + (["task.system_prompt"] if getattr(task, "system_prompt", None) else [])


def check_chat_template(config: RunConfig, task: Any) -> None:
    """Before a run directory exists: a run that needs a chat template (`template_needs`) on a
    model whose tokenizer has none is a one-line UsageError (only the tokenizer is read; a model
    that cannot be read here is left to the model loading's own error)."""
    check_model_template(config.model, template_needs(config, task))


def check_model_template(model: str, needs: list[str]) -> None:
    """`model` (a spec `load_tokenizer` reads) asked for what only a chat template renders
    (`needs`, e.g. ["task.system_prompt"]) without having one: a one-line UsageError (only the
    tokenizer is read; a model that cannot be read here is left to the model loading's error)."""
    if not needs:
        return
    from bench.models.chat import require_template
    from bench.models.loading import load_tokenizer

    tokenizer = load_tokenizer(model)
    if tokenizer is not None:
        try:
            require_template(tokenizer, model, needs)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def load_policy_for_run(config: RunConfig, task: Any, checkpoint: Path | None = None):
    """(policy model in train mode, tokenizer) for a run (`policy_source`), the tokenizer carrying
    the run's chat-template options (`enable_thinking`)."""
    from bench.models.chat import set_template_options
    from bench.models.loading import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(policy_source(config, task, checkpoint))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    set_template_options(tokenizer, enable_thinking=config.enable_thinking)
    model.train()
    return model, tokenizer


def default_learning_rates(n_params: float, task_name: str) -> tuple[float, float]:
    """(policy LR, critic LR) of a run whose config sets neither, for a model of `n_params`
    parameters: small models (< 20M) get the task's tiny-model policy rate
    (`bench.models.recipes`) or else SMALL_LRS, larger ones the paper's (PAPER_LRS). Neither
    rate depends on the algorithm, so algorithms on one task are compared at the same rates."""
    from bench.models.recipes import recipe_for

    small = n_params < SMALL_MODEL_PARAMS
    tier = SMALL_LRS if small else PAPER_LRS
    recipe_lr = recipe_for(task_name).policy_lr if small else None
    policy_lr = tier["policy"] if recipe_lr is None else recipe_lr
    critic_lr = tier["critic"]
    return policy_lr, critic_lr


def resolve_learning_rates(config: RunConfig, policy: Any, task_name: str) -> tuple[float, float]:
    """(policy LR, critic LR) of a run: explicit config values win, the others follow
    `default_learning_rates` for the policy's size."""
    n_params = sum(p.numel() for p in policy.parameters())
    policy_lr, critic_lr = default_learning_rates(n_params, task_name)
    return (
        config.policy_lr if config.policy_lr is not None else policy_lr,
        config.critic_lr if config.critic_lr is not None else critic_lr,
    )


def model_parameters(model: str) -> float:
    """The parameter count of a run's model spec before anything is loaded: 0 for `tiny` (a
    small model), counted on the meta device for a local transformers directory (no weights
    read), inf otherwise (a hub id counts as large)."""
    if model == "tiny":
        return 0
    path = Path(model).expanduser()
    if not (path / "config.json").exists():
        return float("inf")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    return sum(p.numel() for p in net.parameters())


def make_learner(parts: RunParts, resume: Path | None = None):
    """(task, tokenizer, learner) of a run: its algorithm and task (built once, `build_run`),
    the policy and its critic, restored from checkpoint `resume` when given."""
    from bench.seeding import seed_everything
    from bench.train.checkpoints import restore_learner
    from bench.train.distributed import current_dist
    from bench.train.learner import Learner

    config, algo, task = parts.config, parts.algorithm, parts.task
    dist = current_dist()
    seed_everything(config.seed)  # same initial weights on every rank
    from bench.models import lora

    policy, tokenizer = load_policy_for_run(config, task, lora.policy_checkpoint(config, resume))
    policy = lora.apply(policy, config, lora.adapter_dir(config, resume))  # LoRA hook: adapters or unchanged
    policy_lr, critic_lr = resolve_learning_rates(config, policy, config.task)
    learner = Learner(
        algo,
        policy,
        policy_lr=policy_lr,
        critic_lr=critic_lr,
        grad_clip=config.grad_clip,
        minibatches=config.minibatches,
        temperature=config.temperature,
        nan_patience=config.nan_patience,
        chunk_tokens=config.learner_chunk_tokens,
        precision=config.precision,
        activation_checkpointing=config.activation_checkpointing,
        dist=dist,
    )
    if resume is not None:
        restore_learner(learner, resume)
    return task, tokenizer, learner
