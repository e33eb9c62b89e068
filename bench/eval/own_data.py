"""What `bench eval` asks: each benchmark's spec and problems, an own-data benchmark's (`math`,
`benchmarks.registry.OWN_DATA`) built from its task's arguments: a run directory's when the run
trained that task, `--data` read in any layout the task recognises, and `--set task.*` over
either (columns, grader, eval_fraction), typed and checked as `bench run` checks them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bench.errors import UsageError


def add_task_set_argument(p: argparse.ArgumentParser) -> None:
    """`bench eval --set task.FIELD=VALUE` (repeatable)."""
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="task.FIELD=VALUE",
        help="an argument of an own-data benchmark's task (--bench math), as bench run takes it: "
        "task.prompt_column=q, task.answer_column=meta.gold, task.grader=integer, "
        "task.eval_fraction=0.2, ...; with a math run's directory they change its own; repeatable",
    )


def task_args_given(items: list[str]) -> dict[str, Any]:
    """The `--set task.FIELD=VALUE` items as task arguments (one-line UsageError for another key)."""
    from bench.config_values import parse_set_options

    parsed = parse_set_options(items)
    other = sorted(set(parsed) - {"task_args"})
    if other:
        raise UsageError(
            f"--set {other[0]}: bench eval takes task.FIELD=VALUE only (an own-data benchmark's task)"
        )
    return parsed.get("task_args", {})


def benchmark_specs(names: list[str], data: str | None, run_dir: Path | None, set_items: list[str]) -> list:
    """The `BenchmarkSpec` of each name (`own_data_spec` for an own-data one); `--set task.*`
    without an own-data benchmark is a one-line UsageError."""
    from benchmarks import registry as bench_registry

    if set_items and not set(names) & set(bench_registry.OWN_DATA):
        raise UsageError(
            f"--set task.*: sets the arguments of an own-data benchmark's task "
            f"({', '.join(bench_registry.OWN_DATA)}); --bench {','.join(names)} has none"
        )
    given = task_args_given(set_items)
    return [
        own_data_spec(name, data, run_dir, given)
        if name in bench_registry.OWN_DATA
        else bench_registry.get(name)
        for name in names
    ]


def own_data_spec(name: str, data: str | None, run_dir: Path | None, given: dict[str, Any] | None = None):
    """The own-data benchmark `name` of `data` (`--data`: its layout recognised), else of the
    run directory's dataset when the run trained that benchmark's task (every argument it set);
    `given` (`--set task.*`) over either. UnknownBenchmarkError when there is no dataset."""
    from bench.config_values import coerce_task_args
    from bench.eval.checkpoints import run_task
    from benchmarks import registry as bench_registry

    task, own = run_task(run_dir)
    if data is not None:
        own = {"dataset": data}
    elif task != bench_registry.OWN_DATA[name].task:
        own = {}
    given = coerce_task_args(bench_registry.OWN_DATA[name].task, dict(given or {}))
    return bench_registry.get(name, {**own, **given})


def load_problems(specs: list, data: str | None, limit: int | None) -> dict[str, list]:
    """Each spec's problems (`--data` read by `spec.load`, except by an own-data benchmark,
    which is built from it), first `limit`; fails fast when a source is offline."""
    from benchmarks import registry as bench_registry

    return {
        spec.name: spec.load(None if spec.name in bench_registry.OWN_DATA else data, limit) for spec in specs
    }
