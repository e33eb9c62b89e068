"""Paired A-vs-B comparison of evaluations on the same problems: did a checkpoint beat its base?

`bench eval` writes one record per (problem, sample) to `<bench>.jsonl`. This reader turns
each file into per-problem scores (the mean of `correct` over that problem's samples, so
avg@k is their mean) and compares every later file with the first by the paired bootstrap
(`benchmarks.stats.paired_bootstrap`: problems resampled together), the house rule for
A-vs-B claims. Evaluations with the same `--seed` draw the same sampling seeds, which makes
the pairing tighter still.

    python -m results.compare BASE.jsonl NEW.jsonl [NEW2.jsonl ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.scoring import correct_by_problem, problem_scores
from benchmarks.stats import paired_bootstrap
from results.tables import print_table


class CompareError(ValueError):
    """Input that cannot be compared (missing file, not eval records, different problems)."""


def per_problem_scores(path: str | Path) -> tuple[str, dict[str, float], int]:
    """Read an eval record file: its benchmark name, each problem's score
    (`benchmarks.scoring.problem_scores`) and the largest number of samples any problem has
    (the k of avg@k)."""
    path = Path(path)
    if not path.is_file():
        raise CompareError(f"{path}: no such file (give the <bench>.jsonl that bench eval wrote)")
    records: list[dict[str, Any]] = []
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            records.append({"problem_id": str(record["problem_id"]), "correct": bool(record["correct"])})
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise CompareError(
                f"{path}:{line_no}: not an eval record (needs problem_id and correct): {exc}"
            ) from None
        records[-1]["benchmark"] = str(record.get("benchmark", "?"))
    if not records:
        raise CompareError(f"{path}: holds no eval records")
    benchmarks = {r["benchmark"] for r in records}
    if len(benchmarks) > 1:
        raise CompareError(f"{path}: mixes benchmarks {sorted(benchmarks)}")
    samples = correct_by_problem(records)
    return benchmarks.pop(), problem_scores(records), max(len(v) for v in samples.values())


def compare(paths: list[str | Path], n_boot: int = 10000, seed: int = 0) -> list[dict[str, Any]]:
    """One row per file: its avg@k and, for every file after the first, the paired difference
    from the first (in points, i.e. x100) with its 95% CI and two-sided p-value."""
    if len(paths) < 2:
        raise CompareError("give a base file and at least one file to compare with it")
    loaded = [per_problem_scores(p) for p in paths]
    base_bench, base_scores, _ = loaded[0]
    problems = sorted(base_scores)
    rows = []
    for path, (bench, scores, k) in zip(paths, loaded):
        if bench != base_bench:
            raise CompareError(f"{path}: benchmark {bench!r}, the base {paths[0]} is {base_bench!r}")
        if set(scores) != set(base_scores):
            only_here, only_base = len(set(scores) - set(base_scores)), len(set(base_scores) - set(scores))
            raise CompareError(
                f"{path}: not the base's problems ({only_here} only here, {only_base} only in the base); "
                "evaluate both with the same --limit"
            )
        values = np.array([scores[p] for p in problems])
        row: dict[str, Any] = {"file": str(path), "benchmark": bench, "k": k, "n": len(problems)}
        row["avg_at_k"] = float(values.mean())
        if rows:
            base_values = np.array([base_scores[p] for p in problems])
            test = paired_bootstrap(values, base_values, n_boot=n_boot, seed=seed)
            row.update(
                diff_points=100 * test["diff"],
                ci_low_points=100 * test["ci_low"],
                ci_high_points=100 * test["ci_high"],
                p_value=test["p_value"],
            )
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the comparison table (`--json`: one JSON list)."""
    parser = argparse.ArgumentParser(
        prog="python -m results.compare",
        description="Paired bootstrap of eval record files against a base on the same problems.",
    )
    parser.add_argument("base", help="the base's <bench>.jsonl written by bench eval")
    parser.add_argument("new", nargs="+", help="one or more <bench>.jsonl files to compare with the base")
    parser.add_argument("--n-boot", type=int, default=10000, help="bootstrap resamples (default 10000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    args = parser.parse_args(argv)
    if args.n_boot < 100:
        print(f"results.compare: error: --n-boot must be >= 100, got {args.n_boot}", file=sys.stderr)
        return 2
    try:
        rows = compare([args.base, *args.new], n_boot=args.n_boot, seed=args.seed)
    except CompareError as exc:
        print(f"results.compare: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [
        {
            "file": r["file"],
            "k": r["k"],
            "avg@k": f"{r['avg_at_k']:.4f}",
            "vs base (points)": (
                "base"
                if "diff_points" not in r
                else f"{r['diff_points']:+.1f} [{r['ci_low_points']:+.1f}, {r['ci_high_points']:+.1f}]"
            ),
            "p": "" if "p_value" not in r else f"{r['p_value']:.3f}" if r["p_value"] >= 0.001 else "<0.001",
        }
        for r in rows
    ]
    print(f"{rows[0]['benchmark']}: {rows[0]['n']} problems, paired bootstrap 95% CI")
    print_table(table, ["file", "k", "avg@k", "vs base (points)", "p"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
