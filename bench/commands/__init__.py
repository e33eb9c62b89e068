"""One module per `bench` subcommand; each has `register(subparsers)` and a handler that
imports the heavy packages (torch, transformers) only when the command runs. Only `bench.cli`
imports these modules. Options that set a config or spec field are derived from the field
(`add_field_options`), so their help and defaults are the field's own; below them, what
`bench compare` and `bench sweep` share (their run settings, budget, launch options)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import types
import typing
from pathlib import Path
from typing import Any

from bench.errors import UsageError

COMMANDS = (
    "algos",
    "tasks",
    "benchmarks",
    "run",
    "compare",
    "sweep",
    "report",
    "pretrain",
    "eval",
    "perf",
    "plan",
    "power",
)
"""The subcommands, in the order `bench --help` lists them (module `bench.commands.<name>`)."""


def add_plugin_option(p: argparse.ArgumentParser) -> None:
    """The `--plugin MODULE` option of commands that need the algorithm registry."""
    p.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE (a dotted path on PYTHONPATH) and register the Algorithm classes it "
        "defines; may be given several times",
    )


def load_plugins(args: argparse.Namespace) -> None:
    """Register the algorithms of every `--plugin` module."""
    if not getattr(args, "plugin", None):
        return
    from algorithms import registry

    for module in args.plugin:
        registry.load_plugin_module(module)


def add_field_options(p: argparse.ArgumentParser, cls: type, names: tuple[str, ...] | None = None) -> None:
    """One option per field of dataclass `cls` that names a flag (`algorithms.fields.doc(...,
    flag=...)`), or per field of `names`: help, choices and metavar from the field, its type
    when it is a number (other values arrive as text for the command to parse), and its default
    shown in the help. The option's own default is None, so that "not given" reaches the
    command (which leaves the field's default, or a lower config layer, in place)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if "flag" not in f.metadata or (names is not None and f.name not in names):
            continue
        meta = f.metadata
        kind = _scalar_type(hints[f.name])
        default = f.default if f.default is not dataclasses.MISSING else None
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        help_text = meta["help"] + ("" if shown in (None, "", ()) else f" (default: {shown})")
        options: dict[str, Any] = {"dest": f.name, "help": help_text, "metavar": meta.get("metavar")}
        if meta.get("repeat"):
            options.update(action="append", default=[])
        else:
            options.update(type=kind if kind in (int, float) else str, choices=meta.get("choices"))
        p.add_argument(meta["flag"], **options)


def field_options(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The options of `add_field_options(p, cls)` the command line gave (None: not given)."""
    return {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(cls)
        if "flag" in f.metadata and getattr(args, f.name, None) not in (None, [])
    }


def _scalar_type(annotation: Any) -> Any:
    """`int | None` -> int; other annotations unchanged."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next(a for a in typing.get_args(annotation) if a is not type(None))
    return annotation


RESERVED = ("algo", "algo_preset", "task", "seed", "steps")
"""Run fields a comparison or sweep sets itself (`--set` may not)."""


def shared_settings(args: argparse.Namespace, command: str) -> dict:
    """The run fields every run of a comparison or sweep gets: `--set` and `--mode`."""
    from bench.config_values import parse_set_options

    shared = parse_set_options(args.shared)
    if args.mode:
        shared["mode"] = args.mode
    for key in RESERVED:
        if key in shared:
            raise UsageError(
                f"--set {key}: set by bench {command} itself (use --algos, --task, --seeds, --budget)"
            )
    return shared


def launch_options(args: argparse.Namespace) -> Any:
    """The `sweeps.launch.LaunchOptions` of `bench compare` or `bench sweep` (`--workers`,
    `--storage`, `--out`, `--cluster`, ...); workers that the visible GPUs cannot hold are
    refused here, before anything is created."""
    from sweeps.launch import LaunchOptions, gpu_sets
    from sweeps.scheduler import ClusterBackend

    launch = LaunchOptions(**field_options(args, LaunchOptions))
    if launch.workers < 1:
        raise UsageError(f"--workers must be >= 1, got {launch.workers}")
    if launch.cpus_per_run < 0 or launch.cpus_per_run != launch.cpus_per_run:
        raise UsageError(f"--cpus-per-run must be >= 0, got {launch.cpus_per_run:g}")
    if backend_of(launch) is ClusterBackend.LOCAL:
        gpu_sets(launch.workers)
    return launch


def backend_of(launch: Any) -> Any:
    """The `sweeps.scheduler.ClusterBackend` of `--cluster` (its default: `default_backend`)."""
    from sweeps.scheduler import ClusterBackend, default_backend

    return ClusterBackend(launch.cluster) if launch.cluster else default_backend()


def connect_cluster(launch: Any, layers_by_label: dict[str, list[dict]]) -> Any:
    """The Ray cluster of `--cluster ray`, connected, with every run (a label -> its config
    layers) checked to fit on one of its nodes (one line, exit 2, before anything is queued);
    None for the local backend."""
    from sweeps.scheduler import ClusterBackend

    if backend_of(launch) is ClusterBackend.LOCAL:
        return None
    from sweeps.ray_cluster import RayCluster

    cluster = RayCluster.connect(launch.ray_address)
    cluster.check_fits(
        {label: cluster.asks(layers, launch.cpus_per_run) for label, layers in layers_by_label.items()}
    )
    print(cluster.describe(), flush=True)
    return cluster


def run_experiment(out: Path, launch: Any, cluster: Any) -> int:
    """Play every run of the comparison or sweep in `out` on its backend (`sweeps.scheduler`):
    `--workers` processes here, or Ray tasks on `cluster`; 0, or 1 when something failed."""
    if cluster is None:
        from sweeps.launch import run_workers
        from sweeps.worker import open_experiment, refuse_foreign_holds

        refuse_foreign_holds(open_experiment(out, None).queues)
        return workers_ok(run_workers(out, launch.workers), out)
    return cluster.run(out, launch.cpus_per_run)


def where_it_runs(launch: Any, cluster: Any) -> str:
    """'2 workers here' or 'on the ray cluster', for a command's first line."""
    return f"{launch.workers} workers here" if cluster is None else "on the ray cluster"


def checked_budget_and_shared(args: argparse.Namespace, arms: list, command: str) -> tuple:
    """(budget, shared settings) of `bench compare` or `bench sweep`, the arms' algorithm names
    checked first (a typo is answered before any algorithm, or torch, loads)."""
    from algorithms import registry as algo_registry
    from results.budgets import budget_help
    from sweeps.spec import parse_budget

    for arm in arms:
        algo_registry.check(arm.algo)
    if args.budget is None:
        raise UsageError(f"--budget is required: one of {budget_help(units=False)}")
    return parse_budget(args.budget), shared_settings(args, command)


def workers_ok(codes: list[int], out: Path) -> int:
    """0, or 1 with a line per worker that crashed (its traceback is on stderr above)."""
    bad = [c for c in codes if c != 0]
    for code in bad:
        print(
            f"bench: a worker exited with code {code}; rerun the same command to resume {out}",
            file=sys.stderr,
        )
    return 1 if bad else 0
