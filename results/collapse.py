"""The collapse rule, fixed before the stability runs (issue 36), and survival over steps.

The rule: a run has **collapsed at step s**, the first step s >= MIN_STEP (50) whose WINDOW-step
(20) trailing mean training reward (`reward/mean`) is below FRACTION (50%) of the best trailing
mean at any earlier step; or, if it ended non-finite (`RunOutcome.NON_FINITE`: it stopped itself
after `nan_patience` non-finite losses in a row, i.e. diverged), at its last step. A run that
never collapses is censored at its last step.

Why these numbers (chosen before any stability run, from the CPU-scale settings):
- WINDOW 20: a step's mean reward over 64 trajectories has a standard error of up to 0.0625 (a
  0.5 success rate); over 20 steps about 0.014, so a 50% fall from a best of 0.45 (the tiny
  base's level on arith) is ~15 standard errors, and the upward bias of "best of ~1,000 windows"
  (about +3 standard errors, +0.04) cannot make a steady run look collapsed.
- MIN_STEP 50: the paper's earliest collapse is VAPO's at ~90 steps (vanilla GRPO ~160, SAO
  stable for 1,000); from step 50 a best has been sought over 31 windows, and the first steps'
  moves (SAO's 10-step critic warmup, a start-up dip) are behind it.
- FRACTION 50%: the paper's collapses take the reward to near zero; half the best separates
  them from the slow declines of over-fitting or a drifting task.
The same rule flags `collapsed` in every report's runs table (`results.comparison`).

Survival: per arm, the Kaplan-Meier estimate of P(no collapse by step t) from each run's
(steps, collapsed) (`kaplan_meier`), and the median steps to collapse where the curve falls to
0.5 (else "> N", N the longest run).

Two arms' survival compared: the log-rank statistic (scipy's `logrank`), its p-value exact by
permutation (`logrank_exact_p`): at a handful of runs per arm the normal approximation scipy
reports is far too small (3 runs that all collapse against 3 that never do: 0.025 two-sided,
where only 2 of the 20 ways to split the 6 runs are that extreme, p = 0.1).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

WINDOW = 20
MIN_STEP = 50
FRACTION = 0.5


@dataclass(frozen=True)
class TimeToCollapse:
    """One run's time to the event: the collapse step, or its last step when censored."""

    steps: int
    collapsed: bool


def collapse_step(rewards: Sequence[tuple[int, float]], diverged: bool = False) -> int | None:
    """The step at which a run collapsed under the rule (module docstring), or None.

    `rewards`: (step, training reward) of every step, in order (steps without a reward, e.g. the
    step-0 evaluation line, left out); `diverged`: the run ended non-finite."""
    for step, fall in _falls(rewards):
        if fall < FRACTION:
            return step
    if diverged:
        return int(rewards[-1][0]) if rewards else 0
    return None


def _falls(rewards: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(step, trailing mean / best earlier trailing mean) at every step >= MIN_STEP that has a
    positive best before it: the quantity the rule compares with FRACTION."""
    steps = [int(s) for s, _ in rewards]
    values = np.asarray([float(r) for _, r in rewards], dtype=float)
    if len(values) < WINDOW:
        return []
    trailing = np.convolve(values, np.ones(WINDOW) / WINDOW, mode="valid")  # ends at steps[W-1:]
    best_before = np.maximum.accumulate(trailing)
    out = []
    for i in range(1, len(trailing)):
        step, best = steps[i + WINDOW - 1], best_before[i - 1]
        if step >= MIN_STEP and best > 0:
            out.append((step, float(trailing[i] / best)))
    return out


def deepest_fall(rewards: Sequence[tuple[int, float]]) -> float:
    """The lowest trailing mean reward relative to the best earlier one over a run (1: it never
    fell; below FRACTION: it collapsed under the rule); NaN where the rule has nothing to compare.
    Descriptive, added after the first stability runs were seen (not part of the rule): it shows
    how near to a collapse a run came, which a collapse count alone does not."""
    falls = [fall for _, fall in _falls(rewards)]
    return min(min(falls), 1.0) if falls else float("nan")


def time_to_collapse(
    rewards: Sequence[tuple[int, float]], last_step: int, diverged: bool = False
) -> TimeToCollapse:
    """The run's collapse step, or `last_step` (the steps it ran) censored."""
    step = collapse_step(rewards, diverged)
    return TimeToCollapse(last_step, False) if step is None else TimeToCollapse(step, True)


def kaplan_meier(times: Sequence[TimeToCollapse]) -> pd.DataFrame:
    """The Kaplan-Meier survival curve of some runs: one row per step at which a run collapsed
    (columns step, at_risk, collapsed, survival), starting with step 0 at survival 1. A run
    censored at step t is at risk at every collapse step <= t (censored after the events of
    its step, the usual convention)."""
    rows = [{"step": 0, "at_risk": len(times), "collapsed": 0, "survival": 1.0}]
    survival = 1.0
    for step in sorted({t.steps for t in times if t.collapsed}):
        at_risk = sum(t.steps >= step for t in times)
        events = sum(t.steps == step and t.collapsed for t in times)
        survival *= 1.0 - events / at_risk
        rows.append({"step": step, "at_risk": at_risk, "collapsed": events, "survival": survival})
    return pd.DataFrame(rows)


def median_steps_to_collapse(times: Sequence[TimeToCollapse]) -> str:
    """The first step at which the Kaplan-Meier curve is at or below 0.5, or "> N" (N: the longest
    run) when it never gets there; "-" without runs."""
    if not times:
        return "-"
    curve = kaplan_meier(times)
    below = curve[curve["survival"] <= 0.5 + 1e-12]
    return str(int(below["step"].iloc[0])) if len(below) else f"> {max(t.steps for t in times)}"


def logrank_statistic(a: Sequence[TimeToCollapse], b: Sequence[TimeToCollapse]) -> float:
    """scipy's log-rank statistic of `a` against `b`: positive where `a` collapses later or less
    often than `b` (more observed collapses in `b` than expected), 0 when no run collapsed."""
    from scipy import stats

    if not any(t.collapsed for t in (*a, *b)):
        return 0.0  # no event: nothing tells the arms apart (scipy returns NaN)
    result = stats.logrank(_censored(a), _censored(b))
    return -float(result.statistic)  # scipy's sign: positive where `a` collapses sooner


def _censored(times: Sequence[TimeToCollapse]):
    from scipy import stats

    return stats.CensoredData(
        uncensored=[t.steps for t in times if t.collapsed], right=[t.steps for t in times if not t.collapsed]
    )


EXACT_SPLITS = 20_000
"""Up to this many splits the permutation p is exact (every split); beyond, a random sample."""


def logrank_exact_p(a: Sequence[TimeToCollapse], b: Sequence[TimeToCollapse]) -> float:
    """Two-sided p of the log-rank statistic by permutation: the share of the ways to split the
    runs into groups of len(a) and len(b) whose |statistic| is at least the observed one (a valid
    level-alpha test: reject where p <= alpha). Exact (every split) up to EXACT_SPLITS splits
    (3 vs 3: 20; 7 vs 7: 3,432); beyond, EXACT_SPLITS random splits (seed 0), counted with the
    observed one, (1 + as extreme) / (1 + drawn), which keeps the test valid."""
    runs = [*a, *b]
    observed = abs(logrank_statistic(a, b)) - 1e-9
    n, k = len(runs), len(a)
    if math.comb(n, k) <= EXACT_SPLITS:
        splits, extra = itertools.combinations(range(n), k), 0
    else:
        rng = np.random.default_rng(0)
        splits, extra = (rng.choice(n, k, replace=False) for _ in range(EXACT_SPLITS)), 1
    as_extreme = total = extra
    for chosen in splits:
        picked = set(int(i) for i in chosen)
        first = [runs[i] for i in sorted(picked)]
        second = [runs[i] for i in range(n) if i not in picked]
        total += 1
        as_extreme += abs(logrank_statistic(first, second)) >= observed
    return as_extreme / total


def smallest_exact_p(n_a: int, n_b: int) -> float:
    """A floor under the two-sided `logrank_exact_p` of n_a vs n_b runs, whatever the outcome:
    the observed split counts itself, and with equal arms its mirror too (the same |statistic|),
    so p >= 1 / C(n_a + n_b, n_a), or twice that; what a row with these runs could show at best."""
    return min(1.0, (2 if n_a == n_b else 1) / math.comb(n_a + n_b, n_a))
