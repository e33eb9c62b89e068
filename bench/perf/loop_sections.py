"""`bench perf` sections on the whole training loop: async vs sync on arith (`async_vs_sync`) and on
the agent task with slow tools (`agent_async_vs_sync`), and the code sandbox's overhead (`sandbox`)."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.perf import comparison, skipped


def perf_base_checkpoint(task: str = "arith") -> Path:
    """A small pretrained model of `task` for the loop benchmarks (150 steps), cached; rebuilt
    when `bench.models.cache.RECIPE_VERSION` changes."""
    import json

    from bench.models.paths import cache_root
    from bench.models.pretrain import pretrain
    from bench.models.recipes import RECIPE_VERSION

    path = cache_root() / ("perf-base" if task == "arith" else f"perf-base-{task}")
    info = path / "pretrain.json"
    if not info.exists() or json.loads(info.read_text()).get("recipe_version") != RECIPE_VERSION:
        pretrain(task, {}, seed=0, out=path, steps=150, progress=False)
    return path


def _cpu_seconds() -> float:
    """CPU seconds of this process plus its finished children (the engine process, once joined)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


AGENT_TOOL_LATENCY_S = 0.3
"""Mean tool latency (exponential) of the `agent_async_vs_sync` section."""


def async_vs_sync_section(repeats: int, quick: bool) -> dict[str, Any]:
    """Wall time of the same number of trajectories through `bench.train.loop.train`, sync vs async,
    on arith (CPU-bound rollouts with heavy-tailed lengths)."""
    return _loop_modes_section(repeats, quick, "arith", {}, steps=8, per_step=32, target=1.5)


def agent_async_vs_sync_section(repeats: int, quick: bool) -> dict[str, Any]:
    """The same comparison on the agent task with slow tools (exponential latency, mean
    AGENT_TOOL_LATENCY_S per call): rollouts wait on tools, which asynchrony hides."""
    task_args = {"tool_latency": AGENT_TOOL_LATENCY_S, "tool_latency_dist": "exponential"}
    return _loop_modes_section(repeats, quick, "agent", task_args, steps=6, per_step=32, target=2.0)


def _loop_modes_section(
    repeats: int, quick: bool, task: str, task_args: dict[str, Any], steps: int, per_step: int, target: float
) -> dict[str, Any]:
    """Sync vs async `bench.train.loop.train` runs of GRPO on `task`, alternating order per repeat."""
    steps, per_step = (2, 16) if quick else (steps, per_step)
    base = perf_base_checkpoint(task)
    runs, cpu, staleness, bounds, bounds_two = _measure_modes(repeats, task, task_args, base, steps, per_step)
    ratio = statistics.median(runs["sync"]) / statistics.median(runs["async"])
    return comparison(
        "wall_seconds",
        runs["async"],
        runs["sync"],
        peer="bench.train.loop.train --mode sync",
        ratio="peer / ours (sync seconds / async seconds)",
        target=target,
        async_mean_staleness=statistics.fmean(staleness),
        perfect_overlap_bound=statistics.median(bounds),
        two_batches_in_flight_bound=statistics.median(bounds_two),
        overlap_efficiency=ratio / statistics.median(bounds_two),
        cpu_utilisation={mode: statistics.median(u) for mode, u in cpu.items()},
        setup={
            "task": task,
            "task_args": task_args,
            "algorithm": "grpo (defaults, group 8)",
            "steps": steps,
            "trajectories_per_step": per_step,
            "trajectories": steps * per_step,
            "max_staleness": 4,
            "engine_slots": 64,
            "model": f"{base} (bench.models.pretrain.pretrain({task!r}, steps=150), cached)",
        },
        notes=[
            "ours = async mode; seconds = time/elapsed_s of the last step in metrics.jsonl (from the start of "
            "rollouts to the end of the last update; model loading and the final checkpoint excluded)",
            "async_mean_staleness: mean over steps of staleness/mean (policy versions between sampling and training)",
            "perfect_overlap_bound: sync seconds / max(rollout wait, training) of the sync run, the ratio async "
            "would reach if generation and training overlapped perfectly on separate cores",
            "two_batches_in_flight_bound: sync seconds / max(rollout wait / 2, training): the ideal when rollouts "
            "wait on latency rather than CPU, since async keeps two batches of rollouts in flight; "
            "overlap_efficiency = ratio / that bound",
            "cpu_utilisation: CPU seconds of the process and its engine child (all threads) / wall seconds; async needs a second free core "
            "to overlap, so an async value near 1 means the machine gave the process only one core",
            "the same seed per repeat for both modes; the order of the two alternates between repeats",
        ],
    )


def _measure_modes(
    repeats: int,
    task: str,
    task_args: dict[str, Any],
    base: Path,
    steps: int,
    per_step: int,
    extra: dict | None = None,
):
    """`repeats` sync and async runs of GRPO (alternating which goes first): wall seconds and CPU
    utilisation per mode, async mean staleness, and the sync runs' overlap bounds. `extra`: more
    run settings (the disaggregated section's engine and servers)."""
    from bench.config import build_run
    from bench.train.loop import train
    from bench.train.start import start_run

    runs: dict[str, list[float]] = {"sync": [], "async": []}
    cpu: dict[str, list[float]] = {"sync": [], "async": []}
    staleness: list[float] = []
    bounds: list[float] = []
    bounds_two: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-perf-loop-") as tmp:
        for r in range(repeats):
            for mode in ("sync", "async") if r % 2 == 0 else ("async", "sync"):
                parts = build_run(
                    {
                        "algo": "grpo",
                        "task": task,
                        "task_args": task_args,
                        "model": str(base),
                        "mode": mode,
                        "steps": steps,
                        "trajectories_per_step": per_step,
                        "seed": r,
                        "checkpoint_every": 0,
                        **(extra or {}),
                    }
                )
                run = start_run(parts, Path(tmp) / f"{mode}-{r}", progress=False)
                cpu_start = _cpu_seconds()
                train(parts, run, progress=False)
                metrics = run.read_metrics()
                runs[mode].append(metrics[-1]["time/elapsed_s"])  # the final checkpoint save not included
                cpu[mode].append((_cpu_seconds() - cpu_start) / metrics[-1]["time/elapsed_s"])
                if mode == "async":
                    staleness.append(statistics.fmean(m["staleness/mean"] for m in metrics))
                else:  # sync: waiting for rollouts vs training never overlap
                    elapsed = metrics[-1]["time/elapsed_s"]
                    gen = sum(m["time/wait_s"] for m in metrics)
                    bounds.append(elapsed / max(gen, elapsed - gen))
                    bounds_two.append(elapsed / max(gen / 2, elapsed - gen))
    return runs, cpu, staleness, bounds, bounds_two


def sandbox_section(repeats: int, quick: bool) -> dict[str, Any]:
    """The sandbox's median overhead for running a trivial test file, over a plain subprocess
    (`envs.sandbox.perf.measure_test_file_overhead`)."""
    from envs.sandbox import Sandbox
    from envs.sandbox.perf import RUNNER, measure_test_file_overhead

    n = 3 if quick else max(10, 2 * repeats)
    try:
        res = measure_test_file_overhead(n=n)
    except Exception as exc:  # e.g. a machine where the sandbox cannot start
        return skipped(f"measure_test_file_overhead failed: {type(exc).__name__}: {exc}")
    return {
        "metric": "seconds_per_run",
        "ours": res["sandbox_median_s"],
        "peer": res["plain_median_s"],
        "peer_name": "plain subprocess (python -I)",
        "ratio": res["sandbox_median_s"] / res["plain_median_s"],
        "ratio_definition": "ours / peer (seconds per run of a trivial test file)",
        "overhead_s": res["overhead_s"],
        "runs_each": res["n"],
        "program": f"python -I -c {RUNNER!r} (imports test_trivial.py, calls its one passing test)",
        "capabilities": Sandbox.capabilities(),
    }
