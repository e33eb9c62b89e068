"""The `bench` command line: `bench algos`, `bench tasks`, `bench run`, `bench pretrain`, `bench perf`.

Each subcommand's handler imports what it needs lazily, so `bench --help` and `bench algos`
start fast. A user mistake (unknown name, bad config value, missing file) ends with a
one-line `bench: error: ...` and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from bench.errors import RunStopped, UsageError
from bench.tables import print_table


def cmd_algos(args: argparse.Namespace) -> int:
    """List every registered algorithm."""
    from algorithms import registry

    for module in args.plugin or []:
        registry.load_plugin_module(module)
    rows = [registry.describe(name) for name in registry.names()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        r["critic"] = "yes" if r["critic"] else "no"
        r["presets"] = ",".join(r["presets"]) or "-"
    print_table(rows, ["name", "rollouts_per_prompt", "critic", "presets", "source", "summary"])
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:
    """List every registered task."""
    from envs import registry

    rows = registry.describe_tasks()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print_table(rows, ["name", "default_runtime", "summary"])
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Train one algorithm on one task (see `bench run --help`)."""
    from bench.run import run_from_cli

    return run_from_cli(args)


def cmd_pretrain(args: argparse.Namespace) -> int:
    """Build the tiny model's base checkpoint for a task."""
    from bench.pretrain import pretrain_from_cli

    return pretrain_from_cli(args)


def cmd_eval(args: argparse.Namespace) -> int:
    """Evaluate a checkpoint on benchmarks (see `bench eval --help`)."""
    from bench.eval_cli import eval_from_cli

    return eval_from_cli(args)


def cmd_perf(args: argparse.Namespace) -> int:
    """Run the performance benchmarks and print one JSON object."""
    from bench.perf import perf_from_cli

    return perf_from_cli(args)


def _add_plugin_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import MODULE (a dotted path on PYTHONPATH) and register the Algorithm classes it "
        "defines; may be given several times",
    )


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (`bench: error: ...`, exit 2) instead of usage dumps."""

    def error(self, message: str):  # type: ignore[override]
        print(f"bench: error: {message} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `bench` command (every option documented)."""
    parser = _Parser(
        prog="bench",
        description="Experiment harness for RL of LLMs: compare SAO, GRPO, DAPO, PPO and plugins "
        "under one asynchronous training loop.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("algos", help="list registered algorithms")
    p.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")
    _add_plugin_option(p)
    p.set_defaults(func=cmd_algos)

    p = sub.add_parser("tasks", help="list registered tasks (environments)")
    p.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")
    p.set_defaults(func=cmd_tasks)

    from bench.run import add_run_arguments

    p = sub.add_parser("run", help="train an algorithm on a task; writes a run directory")
    add_run_arguments(p)
    _add_plugin_option(p)
    p.set_defaults(func=cmd_run)

    from bench.pretrain import add_pretrain_arguments

    p = sub.add_parser("pretrain", help="supervised warm-start of the tiny model on a task (base checkpoint)")
    add_pretrain_arguments(p)
    p.set_defaults(func=cmd_pretrain)

    from bench.eval_cli import add_eval_arguments

    p = sub.add_parser(
        "eval", help="evaluate a checkpoint on benchmarks; writes records and a summary per benchmark"
    )
    add_eval_arguments(p)
    p.set_defaults(func=cmd_eval)

    from bench.perf import add_perf_arguments

    p = sub.add_parser("perf", help="benchmark engine, learner, GRPO step vs TRL, async vs sync; prints JSON")
    add_perf_arguments(p)
    p.set_defaults(func=cmd_perf)

    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `bench` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except _user_error_types() as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 2
    except RunStopped as exc:
        print(f"bench: run stopped: {exc}", file=sys.stderr)
        return 1


def _user_error_types() -> tuple[type[BaseException], ...]:
    """The exception types that mean "the user asked for something invalid" (exit 2).

    Leaf packages cannot import `bench`, so each defines its own ValueError subclass; they
    are collected here. Any other exception is a bug and keeps its traceback.
    """
    from algorithms.registry import RegistryError
    from bench.models import ModelLoadError
    from benchmarks.base import BenchmarkDataError
    from benchmarks.registry import UnknownBenchmarkError
    from envs.registry import UnknownTaskError

    return (
        UsageError,
        RegistryError,
        UnknownTaskError,
        ModelLoadError,
        UnknownBenchmarkError,
        BenchmarkDataError,
    )


if __name__ == "__main__":
    sys.exit(main())
