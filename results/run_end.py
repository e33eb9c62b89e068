"""What `bench run` prints when a run ends: a short table of what the run did (reward over its
first and last 10% of steps, evaluation scores, steps, trajectories, time, steps/s, stale drops,
non-finite skips) and the commands to run next. Standard library only: it reads what the loop
wrote (summary.json's counts and the metrics.jsonl records)."""

from __future__ import annotations

import math
import statistics
from typing import Any

from results.tables import format_table

WINDOW = 0.1
"""The share of steps the first and last reward averages cover (at least one step each)."""


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def reward_windows(metrics: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """[(label, mean reward/mean)] over the first and the last 10% of the steps that have a reward."""
    steps = [m for m in metrics if m.get("step", 0) >= 1 and isinstance(m.get("reward/mean"), int | float)]
    if not steps:
        return []
    n = max(1, math.ceil(WINDOW * len(steps)))
    out = []
    for label, part in (("first", steps[:n]), ("last", steps[-n:])):
        span = f"step {part[0]['step']}" if len(part) == 1 else f"steps {part[0]['step']}-{part[-1]['step']}"
        out.append((f"reward/mean, {label} 10% ({span})", statistics.fmean(m["reward/mean"] for m in part)))
    return out


def eval_scores(metrics: list[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """benchmark -> [(step, avg@k)] of the in-training evaluations, in step order."""
    out: dict[str, list[tuple[int, float]]] = {}
    for m in metrics:
        for key, value in m.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "eval" and parts[2] == "avg_at_k" and value is not None:
                out.setdefault(parts[1], []).append((int(m.get("step", 0)), float(value)))
    return out


def end_of_run_rows(summary: dict[str, Any], metrics: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The rows of the end-of-run table (`what`, `value`)."""
    used = summary.get("consumption") or {}
    wall = float(summary.get("wall_s") or 0.0)
    trained_s = float(used.get("elapsed_s") or 0.0)  # training time summed over the run's resumes
    steps = summary.get("steps", 0)
    resumed = trained_s > wall + 0.5
    rows = [("stopped by", str(summary.get("stopped_by") or "-")), ("steps", str(steps))]
    rows += [(label, _fmt(value)) for label, value in reward_windows(metrics)]
    for bench, scores in eval_scores(metrics).items():
        (s0, v0), (s1, v1) = scores[0], scores[-1]
        rows.append(
            (
                f"eval/{bench} avg@k",
                _fmt(v1) if s0 == s1 else f"{_fmt(v0)} (step {s0}) -> {_fmt(v1)} (step {s1})",
            )
        )
    generated = used.get("generated_trajectories")
    trained = f"{used.get('trajectories', '-')}" + (
        f" (generated {generated})" if generated is not None else ""
    )
    stale = sum(m.get("rollout/stale_dropped") or 0 for m in metrics)
    requeued = sum(m.get("rollout/stale_requeued") or 0 for m in metrics)
    rows += [
        ("trajectories trained on", trained),
        ("generated tokens", str(used.get("generated_tokens", "-"))),
        (
            "wall time",
            f"{wall:.1f} s" + (f" ({trained_s:.1f} s of training over its resumes)" if resumed else ""),
        ),
        ("steps/s", _fmt(steps / max(wall, trained_s) if max(wall, trained_s) > 0 else None, 2)),
        (
            "stale trajectories dropped",
            f"{int(stale)}" + (f" (requeued {int(requeued)})" if requeued else ""),
        ),
        ("non-finite updates skipped", str(summary.get("nonfinite_skipped", 0))),
    ]
    return [{"what": what, "value": value} for what, value in rows]


def next_commands(
    run_dir: str, config: dict[str, Any], benchmarks: list[str], trajectories: int | None
) -> list[str]:
    """The commands a user runs next on this run: evaluate it, report it, compare algorithms."""
    bench = ",".join(benchmarks) or "NAME"
    other = "grpo" if config.get("algo") != "grpo" else "sao"
    budget = f"trajectories={trajectories}" if trajectories else "trajectories=N"
    commands = [
        (f"bench eval --model {run_dir} --bench {bench}", "score its final checkpoint (avg@k, 95% CI)"),
        (f"bench report {run_dir}", "tables and figures of this run (index.html)"),
        (
            f"bench compare --algos {config.get('algo')},{other} --task {config.get('task')} --budget {budget} "
            "--seeds 3",
            "these algorithms at this budget, on several seeds",
        ),
    ]
    width = max(len(command) for command, _ in commands)
    return [f"{command.ljust(width)}  # {why}" for command, why in commands]


def format_end_of_run(
    run_dir: str,
    summary: dict[str, Any],
    metrics: list[dict[str, Any]],
    config: dict[str, Any],
    benchmarks: list[str],
) -> str:
    """The text `bench run` prints at the end: the table, then the next commands."""
    trajectories = (summary.get("consumption") or {}).get("trajectories")
    lines = [
        f"run finished: {run_dir}",
        format_table(end_of_run_rows(summary, metrics), ["what", "value"]),
        "",
        "next:",
    ]
    lines += ["  " + command for command in next_commands(run_dir, config, benchmarks, trajectories)]
    return "\n".join(lines)
