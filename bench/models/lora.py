"""LoRA for the policy (and the critic) through peft: settings, checks, weight pushes, checkpoints.

Run settings (`bench.config.RunConfig`): `lora_rank` (0 = off, full fine-tuning), `lora_alpha`,
`lora_dropout`, `lora_target_modules` ("all-linear", or comma-separated module names such as
"q_proj,v_proj"). Choices:

1. Policy: `peft.get_peft_model` wraps the loaded policy; only the adapter weights require grad,
   so the learner's optimizer (built over parameters that require grad) trains only them and
   every base weight stays bit-identical (no in-place merge ever touches them).
2. Engine: gets merged weights, never the adapter: a plain copy of the base model
   (`engine_model`) and, on each push, W + scale * B @ A for every adapted layer computed out of
   place (`engine_weights`), under the base model's own parameter names. The torch and vLLM
   engines need no LoRA support for this.
3. Critic: its own LoRA on a frozen copy of the trunk, plus the full value head. Built from the
   policy's LoRA-wrapped backbone (`bench.models.critic.ValueModel.from_policy` copies it, the
   adapters still zero-effect at that point), so its adapters train separately from the
   policy's. Chosen over a value head alone on a frozen trunk: a head on fixed features cannot
   adapt them to predicting values, and the critic's trainable size then matches the policy's
   order, which is the memory the user chose LoRA to save.
4. Checkpoints hold only what trains: the policy's `save_pretrained` writes the adapter and its
   `adapter_config.json` (whose `base_model_name_or_path` is the base reference); the critic's
   trainable tensors (adapters and head) go to `critic/lora_critic.safetensors`. A resume loads
   the base from the run's model spec and the adapters from the checkpoint; `bench eval
   --model RUN_DIR` loads base + adapter and merges them (`bench.models.loading`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

ALL_LINEAR = "all-linear"
CRITIC_FILE = "lora_critic.safetensors"


def targets(spec: str) -> str | list[str]:
    """peft's `target_modules` from the run setting: "all-linear" or a list of module names."""
    return ALL_LINEAR if spec.strip() == ALL_LINEAR else [n.strip() for n in spec.split(",") if n.strip()]


def linear_module_names(model: torch.nn.Module) -> list[str]:
    """The distinct last names of the model's linear layers (what `lora_target_modules` may name)."""
    return sorted(
        {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    )


def check_targets(model: torch.nn.Module, spec: str) -> None:
    """ValueError (one line, with the valid names) when a named target module matches no layer."""
    wanted = targets(spec)
    if wanted == ALL_LINEAR:
        return
    valid = linear_module_names(model)
    missing = [name for name in wanted if name not in valid]
    if missing or not wanted:
        raise ValueError(
            f"lora_target_modules: {', '.join(missing) or repr(spec)} match(es) no layer of the model; "
            f"valid: {ALL_LINEAR} or some of {', '.join(valid)}"
        )


def check_run(config: Any) -> None:
    """Before a run directory exists: a LoRA run needs peft, and named target modules must match
    layers of the model (built on the meta device from its config; a model whose config cannot
    be read locally is left to the model loading's own error). One-line UsageErrors."""
    if not config.lora_rank:
        return
    import importlib.util

    from bench.errors import UsageError

    if importlib.util.find_spec("peft") is None:
        raise UsageError("lora_rank needs peft, which is not installed: pip install 'rl-bench[lora]'")
    model = _meta_model(config.model)
    if model is not None:
        try:
            check_targets(model, config.lora_target_modules)
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def _meta_model(spec: str) -> torch.nn.Module | None:
    """The model of `spec` without weights (meta device), or None when its config is not local."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from bench.models.offline import OFFLINE_MODELS, ensure_offline_model

    try:
        if spec == "tiny":
            from bench.models.tiny import tiny_config
            from bench.models.tokenizer import build_tiny_tokenizer

            model_config = tiny_config(len(build_tiny_tokenizer()))
        else:
            path = str(ensure_offline_model(spec)) if spec in OFFLINE_MODELS else str(Path(spec).expanduser())
            model_config = AutoConfig.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError):
        return None
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(model_config)


def apply(policy: torch.nn.Module, config: Any, adapter_dir: Path | None = None) -> torch.nn.Module:
    """The policy with LoRA adapters (fresh, or loaded trainable from `adapter_dir`), or the policy
    itself when `config.lora_rank` is 0."""
    if not config.lora_rank:
        return policy
    from peft import LoraConfig, PeftModel, get_peft_model

    check_targets(policy, config.lora_target_modules)
    if adapter_dir is not None:
        return PeftModel.from_pretrained(policy, str(adapter_dir), is_trainable=True)
    lora = LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=targets(config.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(policy, lora)


def is_lora(model: torch.nn.Module) -> bool:
    """Whether `model` is a peft model."""
    return hasattr(model, "peft_config")


def engine_weights(policy: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict the engine's plain model takes: the policy's own, or for a LoRA policy the
    merged weights (W + delta per adapted layer, out of place) under the base model's names."""
    if not is_lora(policy):
        return policy.state_dict()
    from peft.tuners.lora import LoraLayer

    base = policy.get_base_model()
    state = {}
    for key, value in base.state_dict().items():
        if ".lora_" not in key:
            state[key.replace(".base_layer.", ".")] = value
    with torch.no_grad():
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                delta = sum(module.get_delta_weight(a) for a in module.active_adapters)
                state[f"{name}.weight"] = module.base_layer.weight + delta
    return state


def engine_model(policy: torch.nn.Module) -> torch.nn.Module:
    """A plain copy of the policy for an engine, in eval mode: for a LoRA policy the base model
    with merged weights (no adapter modules)."""
    if not is_lora(policy):
        return copy.deepcopy(policy).eval()
    merged = copy.deepcopy(policy).merge_and_unload()
    merged.load_state_dict(engine_weights(policy))  # exact: out-of-place merge, as every push
    return merged.eval()


def for_evaluation(policy: torch.nn.Module) -> torch.nn.Module:
    """The model in-training evaluation generates with: the policy itself, or for a LoRA policy a
    merged plain copy (`engine_model`)."""
    return engine_model(policy) if is_lora(policy) else policy


def policy_checkpoint(config: Any, resume: Path | None) -> Path | None:
    """What the policy loads from on resume: the checkpoint's full weights, or for a LoRA run None
    (the base from the model spec; the adapters come from the checkpoint, `apply`)."""
    if resume is None or config.lora_rank:
        return None
    return resume / "policy"


def adapter_dir(config: Any, resume: Path | None) -> Path | None:
    """The checkpoint directory of the policy's adapters to resume from (None: fresh adapters)."""
    return None if resume is None or not config.lora_rank else resume / "policy"


def save_critic(critic: torch.nn.Module, directory: Path) -> None:
    """A LoRA critic's trainable tensors (its adapters and value head) only."""
    from safetensors.torch import save_file

    directory.mkdir(parents=True, exist_ok=True)
    trainable = {n: p.detach().contiguous() for n, p in critic.named_parameters() if p.requires_grad}
    save_file(trainable, str(directory / CRITIC_FILE))


def restore_critic(critic: torch.nn.Module, directory: Path) -> None:
    """Load what `save_critic` wrote into `critic` (every saved name must exist there)."""
    from safetensors.torch import load_file

    missing, unexpected = critic.load_state_dict(load_file(str(directory / CRITIC_FILE)), strict=False)
    if unexpected:
        raise RuntimeError(f"{directory}: critic tensors {unexpected[:3]} do not fit this critic")
