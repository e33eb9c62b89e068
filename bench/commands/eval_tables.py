"""`bench eval`'s terminal output: the results table and each benchmark's breakdown, scores in %."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def print_results(summaries: list[dict[str, Any]], paths: list[tuple[Path, Path]]) -> None:
    """The results table (scores in %), fallback notes, then the files written."""
    rows = []
    for s in summaries:
        lo, hi = s["ci95"]
        rows.append(
            {
                "benchmark": s["benchmark"],
                "n": str(s["n_problems"]),
                "k": str(s["k"]),
                "avg@k": _pct(s["avg_at_k"]),
                "95% CI": f"[{_pct(lo)}, {_pct(hi)}]",
                "pass@k": _pct(s["pass_at_k"][str(s["k"])]),
            }
        )
    from results.tables import print_table

    print_table(rows, ["benchmark", "n", "k", "avg@k", "95% CI", "pass@k"])
    print(
        "scores in %; 95% CI: normal approximation over per-problem pass@1 (bootstrap CI in the summary file)"
    )
    for s in summaries:
        if s.get("breakdown"):
            print_breakdown(s)
    for s in summaries:
        if s["n_string_fallback"]:
            print(
                f"{s['benchmark']}: {s['n_string_fallback']} of {s['n_samples']} samples graded by the string fallback"
            )
    for records_path, summary_path in paths:
        print(f"wrote {records_path}")
        print(f"wrote {summary_path}")


def print_breakdown(summary: dict[str, Any]) -> None:
    """avg@k of one benchmark per value of its breakdown key (scores in %)."""
    from results.tables import print_table

    key = summary["breakdown"]["key"]
    rows = [
        {
            key: value,
            "n": str(g["n_problems"]),
            "avg@k": _pct(g["avg_at_k"]),
            "95% CI": f"[{_pct(g['ci95'][0])}, {_pct(g['ci95'][1])}]",
        }
        for value, g in summary["breakdown"]["groups"].items()
    ]
    print(f"\n{summary['benchmark']} by {key}:")
    print_table(rows, [key, "n", "avg@k", "95% CI"])
