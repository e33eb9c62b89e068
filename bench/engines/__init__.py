"""Rollout engines behind one protocol (`base.Engine`): requests in, tokens, log-probs and the
policy version of every token out.

`make_engine` is the one way to build one: "torch" (`torch_engine.TorchEngine`, pure PyTorch on
CPU or GPU; on CPU optionally in a child process, `process_engine.ProcessEngine`) or "vllm"
(`vllm_engine.VLLMEngine`, GPU, the `gpu` extra) or "http" (`http_engine.HTTPEngine`, inference
servers speaking vLLM's routes), imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.engines.base import ENGINE_NAMES, Engine
from bench.errors import UsageError


def make_engine(
    name: str,
    model: Any,
    tokenizer: Any,
    process: bool = False,
    engine_args: Mapping[str, Any] | None = None,
    rollout_urls: Sequence[str] = (),
    **kwargs: Any,
) -> Engine:
    """Build an engine by name: "torch" (pure PyTorch, CPU or GPU) or "vllm" (GPU, gpu extra).

    `process=True` runs the torch engine of a CPU model in a child process
    (`bench.engines.process_engine`); it is ignored for GPU models and for vLLM (which runs
    its own workers). An unknown name raises `UsageError` (a ValueError) listing the valid names.

    `engine_args`: the run config's options of the vllm engine (`bench.engines.vllm_args`); the
    torch engine takes none. vLLM is imported only here, and only when asked for, so the default
    install never needs it. `rollout_urls`: the servers of the http engine.
    """
    if name == "torch":
        from bench.engines.vllm_args import check_engine_args

        check_engine_args(name, engine_args or {})
        from bench.engines.torch_engine import TorchEngine

        if process and next(model.parameters()).device.type == "cpu":
            from bench.engines.process_engine import ProcessEngine

            return ProcessEngine(model, tokenizer, **kwargs)

        return TorchEngine(model, tokenizer, **kwargs)
    if name == "http":  # `model` gives the architecture and the weights pushed as version 0
        from bench.engines.http_engine import HTTPEngine

        return HTTPEngine(list(rollout_urls), model, tokenizer, **kwargs)
    if name == "vllm":
        from bench.engines.vllm_engine import VLLMEngine

        return VLLMEngine(model, tokenizer, engine_args=engine_args, **kwargs)
    raise UsageError(f"unknown engine '{name}'; valid engines: {', '.join(ENGINE_NAMES)}")
