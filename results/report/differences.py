"""The report's differences: each arm against a baseline (and the paper's claim pairs), with two
intervals that must agree before a difference counts.

For one pair on one benchmark, from the seeds x problems matrices of the two arms (problems
paired: the same problems for both; seeds not: each arm's own runs):

- the two-level bootstrap (`benchmarks.run_stats.paired_difference`): problems resampled jointly,
  each arm's seeds on their own: diff, ci_low, ci_high, p_value (floor 1 / (n_boot + 1));
- the seed-level interval (`benchmarks.seed_stats.welch_interval`): Welch's t over the arms'
  per-seed means on the shared problems: welch_low, welch_high, welch_p, welch_df;
- `verdict`: better (worse) when both 95% intervals lie above (below) 0, else not distinguishable;
- `seed_noise_p`, `seed_noise_p_baseline`: whether each arm's seeds differ by more than its
  evaluation's sampling noise (`seed_stats.seed_noise_test`; NaN without k >= 2 samples);
- `mde`: the difference this design detects with 80% power at level 0.05, from the measured
  spreads: the larger of the Welch test's and the bootstrap's (its interval read as normal);
- poi, poi_low, poi_high: the probability of improvement across seeds (arms' seeds unpaired).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmarks.run_stats import Direction, paired_difference, probability_of_improvement_ci
from benchmarks.seed_stats import minimum_detectable_effect, seed_noise_test, welch_interval

Z95 = 1.959963984540054
"""The normal quantile a 95% interval spans on each side (a bootstrap interval read as normal)."""


def both_intervals_verdict(intervals: list[tuple[float, float]]) -> Direction:
    """better when every interval lies above 0, worse when every one lies below, else not
    distinguishable (an interval with a NaN end counts as containing 0)."""
    if all(low > 0 for low, _ in intervals):
        return Direction.BETTER
    if all(high < 0 for _, high in intervals):
        return Direction.WORSE
    return Direction.NOT_DISTINGUISHABLE


def row_mde(
    welch_se: float, welch_df: float, boot_low: float, boot_high: float, alpha: float = 0.05
) -> float:
    """The minimum detectable effect (80% power, two-sided `alpha`) of a row's rule: the larger
    of the Welch test's and the bootstrap's, the latter's standard error read off its 95%
    interval as (high - low) / (2 x 1.96); NaN when the Welch side is undefined (one seed)."""
    if math.isnan(welch_se):
        return math.nan
    boot_se = (boot_high - boot_low) / (2 * Z95)
    return max(
        minimum_detectable_effect(welch_se, welch_df, alpha),
        minimum_detectable_effect(boot_se, math.inf, alpha),
    )


def _noise_p(x_S_P: np.ndarray, k: int | None) -> float:
    """`seed_noise_test`'s p-value, NaN where it does not apply (values, k < 2, one seed)."""
    if k is None or k < 2 or x_S_P.shape[0] < 2:
        return math.nan
    return seed_noise_test(x_S_P, k)["p_value"]


def pair_row(a: pd.DataFrame, b: pd.DataFrame, k_a: int | None, k_b: int | None, n_boot: int) -> dict | None:
    """The statistics of arm `a` minus arm `b` (seeds x problems frames) on their shared
    problems; None when they share none."""
    problems = sorted(set(a.dropna(axis=1).columns) & set(b.dropna(axis=1).columns))
    if not problems or a.empty or b.empty:
        return None
    x, y = a[problems].to_numpy(), b[problems].to_numpy()
    boot = paired_difference(x, y, n_boot=n_boot)
    welch = welch_interval(x.mean(axis=1), y.mean(axis=1))
    poi = probability_of_improvement_ci(x.mean(axis=1), y.mean(axis=1), n_boot=n_boot)
    return {
        "diff": boot["diff"],
        "ci_low": boot["ci_low"],
        "ci_high": boot["ci_high"],
        "p_value": boot["p_value"],
        "n_boot": n_boot,
        "welch_low": welch["ci_low"],
        "welch_high": welch["ci_high"],
        "welch_p": welch["p_value"],
        "welch_df": welch["df"],
        "verdict": str(
            both_intervals_verdict([(boot["ci_low"], boot["ci_high"]), (welch["ci_low"], welch["ci_high"])])
        ),
        "seed_noise_p": _noise_p(x, k_a),
        "seed_noise_p_baseline": _noise_p(y, k_b),
        "mde": row_mde(welch["se"], welch["df"], boot["ci_low"], boot["ci_high"]),
        "n_seeds": x.shape[0],
        "n_seeds_baseline": y.shape[0],
        "n_problems": len(problems),
        "poi": poi["poi"],
        "poi_low": poi["ci_low"],
        "poi_high": poi["ci_high"],
    }


def differences(
    matrices: dict,
    ks: dict,
    arms: list[str],
    benchmarks: list[str],
    baseline: str,
    n_boot: int = 10000,
    pairs=(),
) -> pd.DataFrame:
    """Each arm minus `baseline` on every benchmark; then each (arm, other) of `pairs` whose arms
    are both here (the paper's claims), other as baseline. `matrices`/`ks`: (arm, benchmark) ->
    seeds x problems frame / samples per problem (`results.report.score_matrix`)."""
    wanted = [(arm, baseline) for arm in arms if arm != baseline]
    wanted += sorted(p for p in pairs if p[1] != baseline and p[0] in arms and p[1] in arms)
    benches = list(dict.fromkeys([*benchmarks, *(bench for _, bench in matrices)]))
    rows = []
    for (arm, other), bench in ((p, bench) for p in wanted for bench in benches):
        a, b = matrices.get((arm, bench)), matrices.get((other, bench))
        if a is None or b is None:
            continue
        row = pair_row(a, b, ks.get((arm, bench)), ks.get((other, bench)), n_boot)
        if row is not None:
            rows.append({"arm": arm, "baseline": other, "benchmark": bench, **row})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    order = {arm: i for i, arm in enumerate(arms)}
    return df.sort_values("arm", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
