"""`bench report`: tables, figures and an HTML page from comparison or run directories."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.errors import UsageError

FORMATS = ("md", "csv", "tex", "html")


def register(sub) -> None:
    """Add `bench report` to the subcommands."""
    p = sub.add_parser("report", help="tables, figures and index.html from comparison or run directories")
    p.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="comparison directories (bench compare --out), sweep directories (bench sweep --out) or run directories",
    )
    p.add_argument("--baseline", default=None, metavar="ARM",
                   help="arm every other arm is compared against (default: grpo when present, else the first arm)")  # fmt: skip
    p.add_argument("--format", default="md,csv,tex,html", metavar="FMT[,FMT]",
                   help=f"what to write: any of {', '.join(FORMATS)} (default: all); figures come with html")  # fmt: skip
    p.add_argument(
        "--out", default=None, metavar="DIR", help="where to write (default: DIR/report of the first DIR)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench report`."""
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UsageError(f"--format {args.format!r}: valid formats are {', '.join(FORMATS)}")
    for d in args.dirs:
        path = Path(d)
        if not any((path / name).exists() for name in ("comparison.json", "config.json", "sweep.json")):
            raise UsageError(f"{d}: neither a comparison directory (comparison.json) nor a run directory (config.json)"
                             " nor a sweep directory (sweep.json)")  # fmt: skip
    from results.report import write_report

    out = Path(args.out) if args.out else Path(args.dirs[0]) / "report"
    paths = write_report([Path(d) for d in args.dirs], out, baseline=args.baseline, formats=formats)
    print(paths.table_text)
    for path in paths.files:
        print(f"wrote {path}")
    return 0
