"""`bench tasks`: list the registered tasks."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    """Add `bench tasks` to the subcommands."""
    p = sub.add_parser("tasks", help="list registered tasks (environments)")
    p.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench tasks`."""
    from envs import registry
    from results.tables import print_table

    rows = registry.describe_all()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print_table(rows, ["name", "default_runtime", "summary"])
    return 0
