"""`bench perf`: a benchmark command (not a test) that prints ONE JSON object of throughput numbers.

Sections (`--only` picks a subset), each the median of `--repeats` runs next to a peer measured
in the same process, interleaved with ours, and their ratio:

1. `engine`: TorchEngine tokens/s vs transformers `model.generate` at the same batch.
2. `learner`: tokens/s of one GRPO policy update through `Learner.train_step`, next to a bare
   PyTorch update (forward, log-probs, backward, AdamW step) on the same batch.
   `length_buckets`: one SAO learner step on arith-shaped (heavy-tailed) rows, forwards per
   length bucket vs one batch padded to the longest row.
3. `grpo_vs_trl`: seconds per GRPO step (generation + update) of our pieces vs TRL's GRPOTrainer.
4. `async_vs_sync`: wall time of `bench.train.loop.train` in sync vs async mode, same trajectories.
5. `agent_async_vs_sync`: the same on the agent task with slow tools (mean 0.3 s per call).
6. `sandbox`: the median overhead of running a trivial test file through `envs.sandbox`.
7. `kv_cache`: TorchEngine tokens/s with its KV-cached runner vs its full-forward runner, on a
   small random Qwen3 (built in the section; `--model` does not apply).
8. `disagg_async_vs_sync`, `weight_transfer`: rollouts on a CPU double server (`--engine http`):
   the async/sync ratio next to the ProcessEngine's, and seconds per weight update next to a
   plain gloo broadcast of the same bytes (`bench.perf.disagg_sections`).

Every number here is a wall-clock time on whatever machine runs it, shared or not: compare
ratios measured in one invocation, not absolute numbers across invocations. Tests never assert
on them. `--threads` sets torch's intra-op threads for ours and the peer alike.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SECTIONS = (
    "engine",
    "learner",
    "length_buckets",
    "grpo_vs_trl",
    "async_vs_sync",
    "agent_async_vs_sync",
    "sandbox",
    "kv_cache",
    "disagg_async_vs_sync",
    "weight_transfer",
)
JSON_VERSION = 1


# ---- measurement helpers (shared by the perf_* section modules) -------------------------------
def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall seconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def interleaved(
    ours: Callable[[], float], peer: Callable[[], float], repeats: int
) -> tuple[list[float], list[float]]:
    """Run each once to warm up, then `repeats` times each, alternating which goes first."""
    ours(), peer()
    runs_ours, runs_peer = [], []
    for r in range(repeats):
        if r % 2 == 0:
            runs_ours.append(ours())
            runs_peer.append(peer())
        else:
            runs_peer.append(peer())
            runs_ours.append(ours())
    return runs_ours, runs_peer


def comparison(
    metric: str,
    runs_ours: list[float],
    runs_peer: list[float],
    peer: str,
    ratio: str,
    target: float | None = None,
    higher_is_better: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """A section's result: medians, the ratio (ours/peer, or peer/ours when `ratio` says so),
    whether the target ratio is reached, and the raw runs."""
    m_ours, m_peer = statistics.median(runs_ours), statistics.median(runs_peer)
    value = m_peer / m_ours if ratio.startswith("peer") else m_ours / m_peer
    out: dict[str, Any] = {
        "metric": metric,
        "ours": m_ours,
        "peer": m_peer,
        "peer_name": peer,
        "ratio": value,
        "ratio_definition": ratio,
    }
    if target is not None:
        out["target"] = f"{'>=' if higher_is_better else '<='} {target}"
        out["reached"] = value >= target if higher_is_better else value <= target
    out["runs"] = {"ours": runs_ours, "peer": runs_peer}
    out.update(extra)
    return out


def skipped(reason: str) -> dict[str, Any]:
    """A section that could not run here."""
    return {"skipped": True, "reason": reason}


# ---- model, machine ----------------------------------------------------------------------------
def load_bench_model(spec: str | None) -> tuple[Any, Any, dict[str, Any]]:
    """(model in eval mode, tokenizer, description): `--model DIR` or a fresh random tiny model."""
    from bench.models.loading import load_model_and_tokenizer
    from bench.models.tiny import new_tiny_model

    if spec is None:
        model, tokenizer = new_tiny_model(0)
        source = "new_tiny_model(0): random init, the embedded tiny Llama and its character tokenizer"
    else:
        model, tokenizer = load_model_and_tokenizer(spec)
        source = str(Path(spec).expanduser())
    info = {
        "source": source,
        "model_type": model.config.model_type,
        "parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(next(model.parameters()).dtype),
        "vocab_size": len(tokenizer),
    }
    return model.eval(), tokenizer, info


def machine_info() -> dict[str, Any]:
    """What the numbers were measured on."""
    from importlib import metadata

    import torch

    versions = {}
    for name in ("torch", "transformers", "accelerate", "trl"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_available": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "loadavg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
