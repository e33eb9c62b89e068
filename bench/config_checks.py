"""Checks of run config values that need more than a type and a range (`bench.config.validate`
calls them): numeric ranges, the budget limits, the weight-sync cadence against the staleness
bound, LoRA against the learner's sharding, the engine and its servers, the processes `bench
run` places, the global batch against the learner ranks, and the model spec. Each raises a one-line UsageError naming the field and what is valid."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.errors import UsageError
from results.budgets import BUDGETS, check_amount


def check_weight_sync(config: Any) -> None:
    """A weight-sync cadence the staleness bound allows: in async mode rollouts are up to N - 1
    versions old from the cadence plus at least one from the overlap, so max_staleness >= N
    (a smaller bound would drop them, defeating the cadence); sync mode allows N - 1 by itself.
    The torch engine alone has a dtype of its own (vLLM's is `engine_args.dtype`); only the
    colocated vLLM engine in sync mode sleeps (`engine_sleep`)."""
    n = config.weight_sync_every
    if config.mode == "async" and n > 1 and config.max_staleness < n:
        raise UsageError(
            f"weight_sync_every={n} makes async rollouts up to {n} versions stale, but max_staleness="
            f"{config.max_staleness} would drop them: set max_staleness >= {n}"
        )
    if config.engine_sleep and (config.engine != "vllm" or config.mode != "sync"):
        raise UsageError(
            f"engine_sleep: the colocated vllm engine sleeps in sync mode only (got engine={config.engine}, "
            f"mode={config.mode}); async rollouts generate while the learner trains"
        )
    if config.engine_dtype != "auto" and config.engine != "torch":
        raise UsageError(
            f"engine_dtype={config.engine_dtype}: only the torch engine takes it; for vllm set "
            f"engine_args.dtype={config.engine_dtype}"
        )


def check_lora_unsharded(config: Any, world_size: int) -> None:
    """LoRA trains in one process at fp32: its adapters are not yet sharded with FSDP2 (more than
    one learner rank) nor cast by its mixed-precision policy (`precision=bf16-mixed`), so either
    with `lora_rank` is refused rather than run untested."""
    if not config.lora_rank:
        return
    if world_size > 1:
        raise UsageError(
            f"lora_rank={config.lora_rank}: LoRA runs in one learner process; launched on {world_size} "
            "ranks (drop lora_rank, or run LoRA without torchrun)"
        )
    if config.precision != "fp32":
        raise UsageError(
            f"lora_rank={config.lora_rank}: LoRA runs with precision=fp32 only, got {config.precision} "
            "(bf16-mixed goes through FSDP2, which LoRA does not use yet)"
        )


def check_placement(config: Any) -> None:
    """The processes `bench run` places (`bench.placement`): at least one learner rank, servers
    only for the http engine and never beside servers named by URL, the NCCL weight transfer only
    for the http engine and where it can run, and, under a launcher, as many learner ranks as it
    started (or the default 1: the launch decides)."""
    from bench.launcher import is_launched, launched_world_size

    if config.learner_ranks < 1 or config.rollout_servers < 0 or config.rollout_tp < 1:
        raise UsageError(
            f"learner_ranks and rollout_tp must be >= 1 and rollout_servers >= 0, got {config.learner_ranks}, "
            f"{config.rollout_tp} and {config.rollout_servers}"
        )
    if config.env_workers < 0:
        raise UsageError(f"env_workers must be >= 0, got {config.env_workers}")
    if config.rollout_servers and config.engine != "http":
        raise UsageError(
            f"rollout_servers={config.rollout_servers}: servers are reached through the http engine; add --engine http"
        )
    if config.rollout_servers and config.rollout_urls.strip() and not is_launched():
        raise UsageError(
            f"rollout_servers={config.rollout_servers} starts servers and rollout_urls names others: set one of them"
        )
    if config.weight_transfer != "gloo":
        if config.engine != "http":
            raise UsageError(
                f"weight_transfer={config.weight_transfer}: only the http engine moves weights to servers"
            )
        from bench.engines.nccl_wire import check_available

        check_available()
    world = launched_world_size()
    if is_launched() and config.learner_ranks not in (1, world):
        raise UsageError(
            f"learner_ranks={config.learner_ranks} under a launcher of {world} ranks: drop learner_ranks "
            "(the launch decides) or run without the launcher (bench run places its ranks itself)"
        )


def check_budgets(config: Any) -> None:
    """Every limit of the budget table (`results.budgets.BUDGETS`) that is set: a whole number
    >= 1, or a finite number > 0, and at most `results.budgets.max_amount(kind)` (None: no limit of
    that kind)."""
    for row in BUDGETS:
        value = getattr(config, row.field)
        if value is None:
            continue
        if row.whole and value < 1:
            raise UsageError(f"{row.field}: must be >= 1, got {value}")
        if not row.whole and not math.isfinite(value):
            raise UsageError(f"{row.field}: must be a finite number, got {value}")
        if not row.whole and value <= 0:
            raise UsageError(f"{row.field}: must be > 0, got {value}")
        problem = check_amount(row.field, value, row.kind)
        if problem is not None:
            raise UsageError(problem)


def check_model_spec(spec: str) -> None:
    """A model spec that names a local path which does not exist: a one-line UsageError before
    any directory is made or any model loaded (hub ids and built-in names pass)."""
    from bench.models.offline import OFFLINE_MODELS

    if spec == "tiny" or spec in OFFLINE_MODELS:
        return
    looks_local = spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1
    if looks_local and not Path(spec).expanduser().is_dir():
        raise UsageError(
            f"model directory not found: {spec} (valid: tiny, {', '.join(OFFLINE_MODELS)}, a "
            "local transformers directory or a hub id)"
        )


def check_numbers(config: Any) -> None:
    """The numeric fields' ranges: counts >= 1 or >= 0, rates and clips finite and > 0, top_p in
    (0, 1], temperature >= 0, LoRA's rank, alpha and dropout."""
    for name in ("trajectories_per_step", "minibatches", "engine_slots", "nan_patience", "weight_sync_every"):
        if getattr(config, name) < 1:
            raise UsageError(f"{name}: must be >= 1, got {getattr(config, name)}")
    non_negative = (
        "max_staleness",
        "checkpoint_every",
        "keep_checkpoints",
        "eval_every",
        "learner_chunk_tokens",
    )
    for name in non_negative:
        if getattr(config, name) < 0:
            raise UsageError(f"{name}: must be >= 0, got {getattr(config, name)}")
    for name in ("temperature", "top_p", "grad_clip", "policy_lr", "critic_lr"):
        value = getattr(config, name)
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name}: must be a finite number, got {value}")
    for name in ("policy_lr", "critic_lr", "grad_clip"):
        if getattr(config, name) is not None and getattr(config, name) <= 0:
            raise UsageError(f"{name}: must be > 0, got {getattr(config, name)}")
    if not 0 < config.top_p <= 1 or config.temperature < 0:
        raise UsageError(
            f"top_p must be in (0, 1] and temperature >= 0, got {config.top_p} and {config.temperature}"
        )
    if config.lora_rank < 0 or config.lora_alpha <= 0 or not 0 <= config.lora_dropout < 1:
        raise UsageError(
            f"lora_rank must be >= 0, lora_alpha > 0 and lora_dropout in [0, 1), got {config.lora_rank}, "
            f"{config.lora_alpha} and {config.lora_dropout}"
        )


def check_engine_and_servers(config: Any) -> None:
    """The engine's options, the processes `bench run` places, and the http engine's servers
    (named by URL, or placed): each answers `/health` before any model loads."""
    from bench.config_values import rollout_urls
    from bench.engines.vllm_args import check_engine_args

    check_engine_args(config.engine, config.engine_args)
    check_placement(config)
    if (config.engine == "http") != bool(rollout_urls(config) or config.rollout_servers):
        raise UsageError(
            "rollout_urls: the http engine needs them (--set rollout_urls=http://HOST:PORT, or rollout_servers=N "
            "to start servers) and only it takes them"
        )
    if config.engine == "http" and rollout_urls(config):
        from bench.engines.http_engine import check_servers

        check_servers(rollout_urls(config))


def check_global_batch(trajectories_per_step: int, group_size: int, algo: str, ranks: int) -> None:
    """`trajectories_per_step` is the global batch: each of the `ranks` learner ranks (the launch's,
    or those `bench run` will place) trains on whole groups of an equal share, so it must divide
    by ranks x rollouts per prompt."""
    if trajectories_per_step % (ranks * group_size) == 0:
        return
    if ranks == 1:
        raise UsageError(
            f"trajectories_per_step={trajectories_per_step} is not a multiple of {algo}'s rollouts per "
            f"prompt ({group_size})"
        )
    raise UsageError(
        f"trajectories_per_step={trajectories_per_step} is the global batch and must divide by {ranks} "
        f"learner ranks x {algo}'s {group_size} rollouts per prompt = {ranks * group_size} (each rank trains "
        "an equal share of whole groups)"
    )
