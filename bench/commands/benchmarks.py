"""`bench benchmarks`: list the registered benchmarks with their versions and pinned sources."""

from __future__ import annotations

import argparse
import json


def register(sub) -> None:
    """Add `bench benchmarks` to the subcommands."""
    p = sub.add_parser("benchmarks", help="list registered benchmarks (versions, sources, default sampling)")
    p.add_argument("--json", action="store_true", help="print the list as JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench benchmarks`."""
    from benchmarks import registry
    from results.tables import print_table

    rows = registry.describe_all()
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0
    for r in rows:
        r["k"] = r["sampling"]["k"]
    print_table(rows, ["name", "version", "turns", "k", "source", "description"])
    return 0
