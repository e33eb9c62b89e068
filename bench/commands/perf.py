"""`bench perf`: the performance benchmarks (`bench.perf`), printed as one JSON object."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.perf import SECTIONS  # the perf package imports torch only inside its functions


def register(sub) -> None:
    """Add `bench perf` to the subcommands."""
    p = sub.add_parser("perf", help="benchmark engine, learner, GRPO step vs TRL, async vs sync; prints JSON")
    add_arguments(p)
    p.set_defaults(func=run)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Options of `bench perf`."""
    p.add_argument(
        "--repeats", type=int, default=5, help="timed runs per measurement; medians are reported (default: 5)"
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (batches, tokens, steps) for a fast smoke run, e.g. in tests",
    )
    p.add_argument(
        "--only",
        metavar="NAME[,NAME]",
        help=f"comma-separated subset of sections to run (default: all): {', '.join(SECTIONS)}",
    )
    p.add_argument(
        "--model",
        metavar="DIR|smollm2",
        help="model to benchmark the engine, learner and TRL comparison with: a local transformers "
        "directory or 'smollm2' (SmolLM2-135M-Instruct, offline; default: a fresh random tiny model, "
        "new_tiny_model(0))",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads for every section, ours and peer alike; 0 keeps torch's "
        "default (default: 1, which suits the tiny model and a shared machine)",
    )
    p.add_argument("--out", metavar="FILE.json", help="also write the JSON object to this file")


def run(args: argparse.Namespace) -> int:
    """Handler of `bench perf`: run, print the JSON object, optionally write it to --out."""
    from bench.perf.runner import run_perf

    result = run_perf(args)
    text = json.dumps(result, indent=2, default=float)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    print(text)
    return 0
