"""The vLLM engine's options: run-config `engine_args` checked against vLLM's `EngineArgs`.

`--set engine_args.gpu_memory_utilization=0.4` (or a `[engine_args]` TOML table) reaches
`vllm.EngineArgs` unchanged, except for what the harness owns (`RESERVED`: the model path, the
slot count, the context length, the log-prob mode), and on top of `DEFAULTS`. Names are checked
against `EngineArgs`'s fields (did-you-mean on a typo) and values converted to the field's type
when its default says which; without vLLM installed only the harness's own checks run (a run with
`--engine vllm` fails anyway, with the install hint). Imports no vLLM at module level.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Mapping
from typing import Any

from bench.config_values import coerce_value, did_you_mean
from bench.errors import UsageError

RESERVED = {
    "model": "the harness saves the policy and points vLLM at it",
    "tokenizer": "the harness saves the tokenizer with the policy",
    "max_num_seqs": "set engine_slots instead",
    "max_model_len": "the model's own context length (max_position_embeddings)",
    "logprobs_mode": "the harness needs processed_logprobs (log-probs after temperature)",
}
"""EngineArgs fields the harness sets itself, and why they cannot be overridden."""
DEFAULTS: dict[str, Any] = {
    "gpu_memory_utilization": 0.5,
    "enforce_eager": True,
    "enable_prefix_caching": False,
    "async_scheduling": False,
}
"""The harness's defaults, each overridable (`vllm_engine` module docstring says why)."""


def engine_fields() -> dict[str, dataclasses.Field] | None:
    """`vllm.EngineArgs`'s fields by name, or None when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        return None
    from vllm.engine.arg_utils import EngineArgs

    return {f.name: f for f in dataclasses.fields(EngineArgs)}


def check_engine_args(
    engine: str, args: Mapping[str, Any], fields: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A checked copy of `args` for `engine`; UsageError naming the option otherwise.

    `fields`: `EngineArgs`'s fields (`engine_fields()` when None and `args` is not empty)."""
    args = dict(args)
    if not args:
        return args
    if engine != "vllm":
        raise UsageError(
            f"engine_args: options of the vllm engine ({', '.join(sorted(args))}); engine {engine!r} takes none"
        )
    for name in args:
        if name in RESERVED:
            raise UsageError(f"engine_args.{name}: set by the harness ({RESERVED[name]})")
    fields = engine_fields() if fields is None else fields
    if fields is not None:
        for name in args:
            if name not in fields:
                raise UsageError(
                    f"engine_args.{name}: not an option of vLLM's EngineArgs{did_you_mean(name, fields)}"
                )
            default = getattr(fields[name], "default", None)
            if type(default) in (bool, int, float, str):
                args[name] = coerce_value(f"engine_args.{name}", args[name], type(default))
    memory = args.get("gpu_memory_utilization")
    if memory is not None and not (isinstance(memory, int | float) and 0 < float(memory) <= 1):
        raise UsageError(f"engine_args.gpu_memory_utilization: must be in (0, 1], got {memory!r}")
    return args


def launcher_args(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Under `accelerate launch`/torchrun with several processes: vLLM's `external_launcher`
    executor (each rank's engine on its own GPU, LOCAL_RANK, inside the launcher's process group)
    with one sampling seed per rank; else nothing."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1 or "distributed_executor_backend" not in fields:
        return {}
    return {
        "distributed_executor_backend": "external_launcher",
        "seed": int(os.environ.get("RANK", "0") or 0),
    }


def engine_kwargs(
    model_dir: str,
    dtype: str,
    max_batch_size: int,
    max_len: int,
    user: Mapping[str, Any],
    fields: Mapping[str, Any],
) -> dict[str, Any]:
    """The `vllm.EngineArgs` keyword arguments: the harness's settings, `DEFAULTS` (those this vLLM
    has), the launcher's, then the user's checked `engine_args`."""
    args: dict[str, Any] = {
        "model": model_dir,
        "tokenizer": model_dir,
        "dtype": dtype,
        "max_num_seqs": max_batch_size,
        "max_model_len": max_len,
        "seed": 0,
        "logprobs_mode": "processed_logprobs",
    }
    args.update({k: v for k, v in DEFAULTS.items() if k in fields})
    args.update(launcher_args(fields))
    args.update(user)
    return args
