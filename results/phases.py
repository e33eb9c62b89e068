"""Per-phase adaptation of an online-drift run: did the policy follow each shift?

A drifting task (`envs/online.py`) logs `drift/phase` (the phase of the step's episodes),
`reward/style` (the share that followed the phase's rule) and `reward/mean` every step. This
reader cuts a run's `metrics.jsonl` into the consecutive stretches of steps in one phase
and reports, for each, the mean of its first and last `edge` steps: a rule the policy follows
shows `style_last > style_first` in every phase (the paper's online figure: reward drops at
each shift and recovers).

    python -m results.phases RUN_DIR [--edge 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

from results.rundir import RunDir
from results.tables import print_table


def phase_segments(rows: Sequence[dict[str, Any]], edge: int = 5) -> list[dict[str, Any]]:
    """One summary per stretch of consecutive steps in the same phase (rows without
    `drift/phase` or `reward/style`, e.g. eval-only lines, are skipped): its phase, first and
    last step, the means of `reward/style` and `reward/mean` over its first and last `edge`
    steps (fewer when the stretch is shorter), and of `reward/style` over the whole stretch."""
    if edge < 1:
        raise ValueError(f"edge must be >= 1, got {edge}")
    stretches: list[tuple[int, list[dict[str, Any]]]] = []
    for row in rows:
        if row.get("drift/phase") is None or row.get("reward/style") is None:
            continue
        # a step straddling a switch logs its episodes' mean phase; round half up, so an even
        # split always counts toward the new phase (Python's round() would alternate by parity)
        phase = math.floor(row["drift/phase"] + 0.5)
        if not stretches or stretches[-1][0] != phase:
            stretches.append((phase, []))
        stretches[-1][1].append(row)

    def mean(part: list[dict[str, Any]], key: str) -> float:
        values = [r[key] for r in part if r.get(key) is not None]
        return sum(values) / len(values) if values else float("nan")

    out = []
    for phase, part in stretches:
        head, tail = part[:edge], part[-edge:]
        out.append(
            {
                "phase": phase,
                "first_step": part[0]["step"],
                "last_step": part[-1]["step"],
                "steps": len(part),
                "style_first": mean(head, "reward/style"),
                "style_last": mean(tail, "reward/style"),
                "reward_first": mean(head, "reward/mean"),
                "reward_last": mean(tail, "reward/mean"),
                "style_mean": mean(part, "reward/style"),
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the per-phase table of a run directory (`--json`: one JSON list)."""
    parser = argparse.ArgumentParser(
        prog="python -m results.phases", description="Per-phase adaptation of an online-drift run."
    )
    parser.add_argument("run_dir", help="a run directory of a drifting task (e.g. --task drift)")
    parser.add_argument(
        "--edge", type=int, default=5, help="steps averaged at each end of a phase (default 5)"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    args = parser.parse_args(argv)
    run = RunDir(args.run_dir)
    if not run.metrics_path.is_file():
        print(f"results.phases: error: no metrics.jsonl in {args.run_dir}", file=sys.stderr)
        return 2
    try:
        segments = phase_segments(run.read_metrics(), args.edge)
    except ValueError as exc:  # a bad --edge
        print(f"results.phases: error: --{exc}", file=sys.stderr)
        return 2
    if not segments:
        print(
            f"results.phases: error: {args.run_dir} has no drift/phase metrics (not a drifting task)",
            file=sys.stderr,
        )
        return 2
    if args.json:
        print(json.dumps(segments, indent=2))
        return 0
    rows = [
        {
            "phase": s["phase"],
            "steps": f"{s['first_step']}-{s['last_step']}",
            "style": f"{s['style_first']:.2f} -> {s['style_last']:.2f}",
            "reward": f"{s['reward_first']:.2f} -> {s['reward_last']:.2f}",
        }
        for s in segments
    ]
    print_table(rows, ["phase", "steps", "style", "reward"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
