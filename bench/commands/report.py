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
        nargs="*",
        metavar="DIR",
        help="comparison directories (bench compare --out), sweep directories (bench sweep --out) or run directories",
    )
    p.add_argument(
        "--baseline",
        default=None,
        metavar="ARM",
        help="arm every other arm is compared against (default: grpo when present, else the first arm)",
    )
    p.add_argument(
        "--format",
        default="md,csv,tex,html",
        metavar="FMT[,FMT]",
        help=f"what to write: any of {', '.join(FORMATS)} (default: all); figures come with html",
    )
    p.add_argument(
        "--out", default=None, metavar="DIR", help="where to write (default: DIR/report of the first DIR)"
    )
    p.add_argument(
        "--verdicts",
        default=None,
        metavar="REFERENCE_DIR",
        help="instead: VERDICTS.md in REFERENCE_DIR (e.g. results/reference), one row per paper claim "
        "from its reference comparisons' tables",
    )
    p.add_argument(
        "--readme",
        default=None,
        metavar="FILE",
        help="with --verdicts: also put the table between FILE's verdict markers (README.md)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Handler of `bench report`."""
    if args.verdicts is not None:
        return _verdicts(args)
    if not args.dirs:
        raise UsageError(
            "bench report: give comparison, sweep or run directories (or --verdicts REFERENCE_DIR)"
        )
    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise UsageError(f"--format {args.format!r}: valid formats are {', '.join(FORMATS)}")
    for d in args.dirs:
        path = Path(d)
        if not any((path / name).exists() for name in ("comparison.json", "config.json", "sweep.json")):
            raise UsageError(
                f"{d}: neither a comparison directory (comparison.json) nor a run directory (config.json)"
                " nor a sweep directory (sweep.json)"
            )
    from results.files import check_writable
    from results.report import write_report

    out = Path(args.out) if args.out else Path(args.dirs[0]) / "report"
    check_writable(out)  # a full or read-only disk: before the tables and figures are computed
    paths = write_report([Path(d) for d in args.dirs], out, baseline=args.baseline, formats=formats)
    print(paths.table_text)
    for path in paths.files:
        print(f"wrote {path}")
    from bench.trackers.final import log_report

    log_report(paths)
    return 0


def _verdicts(args: argparse.Namespace) -> int:
    """`bench report --verdicts ROOT [--readme FILE]`."""
    root = Path(args.verdicts)
    if args.dirs:
        raise UsageError(
            "bench report --verdicts takes no DIR arguments: it reads REFERENCE_DIR's comparisons"
        )
    if not root.is_dir():
        raise UsageError(
            f"--verdicts {args.verdicts}: not a directory (the reference root, e.g. results/reference)"
        )
    readme = Path(args.readme) if args.readme else None
    if readme is not None and not readme.is_file():
        raise UsageError(f"--readme {args.readme}: no such file")
    from results.report.reference_pages import refresh_reference_pages
    from results.report.verdicts import verdicts_markdown, write_verdicts

    try:
        path = write_verdicts(root, readme)
        pages = refresh_reference_pages(root)  # a reference in parts: its page judged over all
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(verdicts_markdown(root))
    print(f"wrote {path}" + (f" and the verdict block of {readme}" if readme else ""))
    for page in pages:
        print(f"rewrote the bottom line of {page} (judged over the reference's parts)")
    return 0
