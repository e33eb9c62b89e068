"""The evidence of a report: every (arm, seed, benchmark, problem) cell, committed with it.

    score_matrix.csv   benchmark, problem, k, then one column per run `<arm>/s<seed>`

A cell holds the number of the problem's k samples that were correct (`c`, or `c/n` where that
run drew n != k samples), empty where the run has no evaluation of the problem. Pseudo-benchmarks
that are not counts (the drift report's `drift-recovery` label shares) have an empty k and the
value itself in the cell. One row per (benchmark, problem), so a reference of 4 arms x 3 seeds
x 300 problems is ~15 KB: every score, interval and difference of the report can be recomputed
from it (`read_score_matrix`, then `results.report.tables` and `results.report.differences`),
and so can the variance components a plan needs (`bench power`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from results.comparison import Comparison

SCORE_MATRIX_FILE = "score_matrix.csv"
_RUN_COLUMN = re.compile(r"(?P<arm>.+)/s(?P<seed>-?\d+)")

Matrices = dict[tuple[str, str], pd.DataFrame]
"""(arm, benchmark) -> a seeds x problems frame of per-cell scores (fraction correct)."""


def cell_counts(comparison: Comparison) -> pd.DataFrame:
    """One row per (arm, benchmark, seed, problem) of the final evaluations: `correct` (how many
    samples were), `samples` (how many were drawn). Empty without evaluations."""
    columns = ["arm", "benchmark", "seed", "problem_id", "correct", "samples"]
    scores = comparison.scores
    if scores.empty:
        return pd.DataFrame(columns=columns)
    return scores[columns].sort_values(columns[:4]).reset_index(drop=True)


def matrices_from_counts(counts: pd.DataFrame) -> tuple[Matrices, dict[tuple[str, str], int]]:
    """(matrices, k): each (arm, benchmark)'s seeds x problems frame of fractions correct, and
    its samples per problem (the most any cell drew)."""
    if counts.empty:
        return {}, {}
    cells = counts.assign(score=counts["correct"] / counts["samples"])
    matrices, ks = {}, {}
    for (arm, bench), group in cells.groupby(["arm", "benchmark"], sort=True):
        matrices[(arm, bench)] = group.pivot(index="seed", columns="problem_id", values="score").sort_index()
        ks[(arm, bench)] = int(group["samples"].max())
    return matrices, ks


def write_score_matrix(
    path: Path, counts: pd.DataFrame, arms: list[str], extra: Matrices | None = None
) -> Path:
    """Write `counts` (`cell_counts`) and any `extra` matrices of values (e.g. drift-recovery)
    to `path` in the module docstring's layout, runs in `arms` order then by seed."""
    runs = {(r.arm, int(r.seed)) for r in counts.itertuples()}
    runs |= {(arm, int(seed)) for (arm, _), m in (extra or {}).items() for seed in m.index}
    runs = sorted(runs, key=lambda r: (_order(arms, r[0]), r[1]))
    columns = [f"{arm}/s{seed}" for arm, seed in runs]
    rows = []
    for bench, group in counts.groupby("benchmark", sort=True):
        k = int(group["samples"].max())
        cells = group.assign(run=group["arm"] + "/s" + group["seed"].astype(str))
        text = [str(c) if n == k else f"{c}/{n}" for c, n in zip(cells["correct"], cells["samples"])]
        wide = cells.assign(text=text).pivot(index="problem_id", columns="run", values="text")
        rows.append(wide.reindex(columns=columns).assign(benchmark=bench, k=k))
    for (arm, bench), m in (extra or {}).items():
        wide = m.T.rename(columns=lambda seed, arm=arm: f"{arm}/s{seed}").map(_value)
        rows.append(wide.reindex(columns=columns).assign(benchmark=bench, k=""))
    table = pd.concat(rows) if rows else pd.DataFrame(columns=["benchmark", "k", *columns])
    table = table.rename_axis("problem").reset_index()
    table = table.groupby(["benchmark", "problem", "k"], sort=False, as_index=False).first()
    path.parent.mkdir(parents=True, exist_ok=True)
    table[["benchmark", "problem", "k", *columns]].to_csv(path, index=False)
    return path


def read_score_matrix(path: Path) -> tuple[Matrices, dict[tuple[str, str], int], list[str]]:
    """(matrices, k per (arm, benchmark), arms in the file's order) of a `score_matrix.csv`;
    k is absent for pseudo-benchmarks of values."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    runs = [(c, _RUN_COLUMN.fullmatch(c)) for c in table.columns[3:]]
    if any(m is None for _, m in runs):
        raise ValueError(f"{path}: run columns must be named <arm>/s<seed>")
    arms = list(dict.fromkeys(m["arm"] for _, m in runs))
    matrices, ks = {}, {}
    for bench, rows in table.groupby("benchmark", sort=False):
        k = int(rows["k"].iloc[0]) if rows["k"].iloc[0] else None
        for arm in arms:
            cols = [(c, int(m["seed"])) for c, m in runs if m["arm"] == arm]
            frame = pd.DataFrame(
                {seed: [_parse(v, k) for v in rows[c]] for c, seed in cols}, index=list(rows["problem"])
            ).T
            frame = frame.dropna(how="all")
            if frame.size and frame.notna().any().any():
                matrices[(arm, bench)] = frame.rename_axis(index="seed", columns="problem_id")
                if k is not None:
                    ks[(arm, bench)] = k
    return matrices, ks, arms


def _parse(text: str, k: int | None) -> float:
    """A cell's score: c/k, c/n, a value, or NaN when empty."""
    if text == "":
        return math.nan
    if k is None:
        return float(text)
    correct, _, samples = text.partition("/")
    return int(correct) / (int(samples) if samples else k)


def _value(x: float) -> str:
    """A value cell: repr precision (the CSV round trip must give the same float)."""
    return "" if pd.isna(x) else repr(float(x))


def _order(arms: list[str], arm: str) -> int:
    return arms.index(arm) if arm in arms else len(arms)
