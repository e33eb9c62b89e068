"""One module per `bench` subcommand; each has `register(subparsers)` and a handler that
imports the heavy packages (torch, transformers) only when the command runs. Only `bench.cli`
imports these modules."""

from __future__ import annotations

import argparse

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
