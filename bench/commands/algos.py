"""`bench algos`: list the registered algorithms."""

from __future__ import annotations

import argparse
import json

from bench.commands import add_plugin_option, load_plugins


def register(sub) -> None:
    """Add `bench algos` to the subcommands."""
    p = sub.add_parser("algos", help="list registered algorithms")
    p.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")
    add_plugin_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench algos`."""
    from algorithms import registry
    from results.tables import print_table

    load_plugins(args)
    rows = [registry.describe(name) for name in registry.names()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        r["critic"] = "yes" if r["critic"] else "no"
        r["presets"] = ",".join(r["presets"]) or "-"
    print_table(rows, ["name", "rollouts_per_prompt", "critic", "presets", "source", "summary"])
    return 0
