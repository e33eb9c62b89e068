"""Planning a comparison from a pilot: how many seeds, problems and samples a difference needs.

A pilot is a comparison directory (`bench compare --out`), a report directory holding its
`score_matrix.csv` (`bench report`, references from issue 36 on), or an older report directory
with only `tables/per_seed.csv`. From the cells, `benchmarks.power.estimate_variances` gives the
variance components, and any (seeds, problems, samples) can be planned. From per-seed means
alone only the seed-level side is known, at the pilot's own problems and samples: the plan then
gives seeds for that design and says that the problem side needs the cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.power import Design, Variances, estimate_variances, mde, seeds_needed
from benchmarks.seed_stats import minimum_detectable_effect, power_t
from results.comparison import SPEC_FILE, load
from results.report.score_matrix import (
    SCORE_MATRIX_FILE,
    cell_counts,
    matrices_from_counts,
    read_score_matrix,
)


class PlanError(ValueError):
    """A pilot that cannot be planned from as asked (one-line message naming the choices)."""


@dataclass(frozen=True)
class Pilot:
    """What a plan starts from: the pair, the pilot's design, and its variances (components
    when the cells are known, else only each arm's seed-mean variance at the pilot's design)."""

    source: str
    arm: str
    baseline: str
    benchmark: str
    design: Design
    variances: Variances | None
    seed_mean_vars: tuple[float, float]


def _pick(choice: str | None, options: list[str], what: str, flag: str) -> str:
    if choice is not None:
        if choice not in options:
            raise PlanError(
                f"{flag} {choice!r} is not one of the pilot's {what}s; choose one of {', '.join(options)}"
            )
        return choice
    if len(options) != 1:
        raise PlanError(f"the pilot has several {what}s ({', '.join(options)}): name one with {flag}")
    return options[0]


def _pair(arms: list[str], arm: str | None, baseline: str | None) -> tuple[str, str]:
    if arm is None and baseline is None and len(arms) == 2:
        return arms[0], arms[1]
    if arm is None or baseline is None:
        raise PlanError(f"name the pair with --arm and --baseline; the pilot's arms: {', '.join(arms)}")
    return _pick(arm, arms, "arm", "--arm"), _pick(baseline, arms, "arm", "--baseline")


def load_pilot(path: Path, arm: str | None, baseline: str | None, benchmark: str | None) -> Pilot:
    """The pilot at `path` for `arm` minus `baseline` on `benchmark` (module docstring)."""
    if (path / SPEC_FILE).exists():
        comparison = load([path])
        matrices, ks = matrices_from_counts(cell_counts(comparison))
        return _from_cells(str(path), matrices, ks, comparison.arms, (arm, baseline), benchmark)
    if (path / SCORE_MATRIX_FILE).exists():
        matrices, ks, arms = read_score_matrix(path / SCORE_MATRIX_FILE)
        return _from_cells(str(path / SCORE_MATRIX_FILE), matrices, ks, arms, (arm, baseline), benchmark)
    per_seed = path / "tables" / "per_seed.csv"
    if per_seed.exists():
        return _from_per_seed(path, arm, baseline, benchmark)
    raise PlanError(
        f"{path}: not a pilot: no {SPEC_FILE} (a comparison), {SCORE_MATRIX_FILE} or tables/per_seed.csv (a report)"
    )


def _from_cells(source, matrices, ks, arms, pair, benchmark) -> Pilot:
    """A pilot from cells: (arm, benchmark) -> seeds x problems fractions, k of each, arm order."""
    benches = sorted({b for (_, b) in ks})
    bench = _pick(benchmark, benches, "benchmark", "--benchmark")
    arm, baseline = _pair([a for a in arms if (a, bench) in ks], *pair)
    a, b = matrices[(arm, bench)], matrices[(baseline, bench)]
    problems = sorted(set(a.dropna(axis=1).columns) & set(b.dropna(axis=1).columns))
    x, y, k = a[problems].to_numpy(), b[problems].to_numpy(), min(ks[(arm, bench)], ks[(baseline, bench)])
    try:
        variances = estimate_variances(x, y, k)
    except ValueError as exc:
        raise PlanError(f"{source}: {exc}") from None
    design = Design(min(x.shape[0], y.shape[0]), len(problems), k)
    return Pilot(source, arm, baseline, bench, design, variances, variances.seed_mean_vars(len(problems), k))


def _from_per_seed(path: Path, arm, baseline, benchmark) -> Pilot:
    per_seed = pd.read_csv(path / "tables" / "per_seed.csv").dropna(subset=["avg_at_k"])
    scores = pd.read_csv(path / "tables" / "scores.csv")
    bench = _pick(benchmark, sorted(set(per_seed["benchmark"])), "benchmark", "--benchmark")
    rows = per_seed[per_seed["benchmark"] == bench]
    arm, baseline = _pair(list(dict.fromkeys(rows["arm"])), arm, baseline)
    seeds = [rows[rows["arm"] == x]["avg_at_k"].to_numpy() for x in (arm, baseline)]
    if min(len(s) for s in seeds) < 2:
        raise PlanError(f"{path}: a pilot needs at least 2 seeds per arm")
    score = scores[(scores["arm"] == arm) & (scores["benchmark"] == bench)].iloc[0]
    design = Design(min(len(s) for s in seeds), int(score["n_problems"]), int(score["k"]))
    return Pilot(
        str(path / "tables" / "per_seed.csv"),
        arm,
        baseline,
        bench,
        design,
        None,
        tuple(float(s.var(ddof=1)) for s in seeds),
    )


def seed_side_plan(pilot: Pilot, diff: float, alpha: float, power: float) -> tuple[int | None, float]:
    """(seeds per arm for `diff`, MDE at the pilot's seeds) from the seed-mean variances alone,
    at the pilot's problems and samples (Welch's t)."""
    va, vb = pilot.seed_mean_vars

    def se_df(seeds: int) -> tuple[float, float]:
        sa, sb = va / seeds, vb / seeds
        return math.sqrt(sa + sb), (sa + sb) ** 2 / ((sa**2 + sb**2) / (seeds - 1)) if sa + sb else math.inf

    needed = next((s for s in range(2, 1001) if power_t(diff, *se_df(s), alpha) >= power), None)
    return needed, minimum_detectable_effect(*se_df(pilot.design.seeds), alpha, power)


def plan_table(
    pilot: Pilot, diff: float, problems: list[int], samples: list[int], alpha: float, power: float
) -> pd.DataFrame:
    """For each (problems, samples): the seeds per arm `diff` needs at `power`, and the MDE at
    those seeds (columns: problems, samples, seeds per arm, MDE (points)). Needs components."""
    rows = []
    for n_problems in problems:
        for k in samples:
            seeds = seeds_needed(diff, pilot.variances, n_problems, k, alpha, power)
            at = mde(pilot.variances, Design(seeds, n_problems, k), alpha, power) if seeds else math.nan
            rows.append(
                {
                    "problems": n_problems,
                    "samples": k,
                    "seeds per arm": seeds if seeds else "> 1000",
                    "MDE (points)": "-" if math.isnan(at) else f"{100 * at:.2f}",
                }
            )
    return pd.DataFrame(rows)
