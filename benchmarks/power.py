"""Power and planning for a two-arm comparison: how many seeds, problems and samples a
difference needs, from the variance components a pilot comparison measured.

The model of one arm's cell (seed s, problem p; the fraction of k samples correct), in score
units (fractions; the CLI speaks points of %):

    x[s, p] = mu + problem_p + arm-by-problem_p + seed_s + seed-by-problem_sp + sampling noise

- `seed_a`, `seed_b`: each arm's between-seed variance (tau^2: how much training runs differ);
- `seed_problem`: the seed x problem interaction (runs differ on some problems, not all);
- `sample`: the variance of one 0/1 sample, p(1 - p) averaged over cells (k samples divide it);
- `problem`: the variance over problems of the arms' expected per-problem difference (which
  problems one arm solves and the other does not); the shared problem effect cancels.

So one arm's seed mean varies by V = tau^2 + (seed_problem + sample / k) / P, and the difference
of the arms' means over S_a and S_b seeds by V_a / S_a + V_b / S_b: the seed-level (Welch)
interval's variance, for the difference on these problems. The interval over the problem
population (the bootstrap's) adds problem / P. A verdict needs both intervals to exclude 0, and
both tests rest on the same estimate, so the rule's power is about the smaller of the two
powers and its minimum detectable effect the larger of the two.

Estimates from a pilot's cells (`estimate_variances`), by the two-way layout of each arm:
sample = mean of x(1-x) k/(k-1) over cells (unbiased for p(1-p)); the residual mean square
of the seeds x problems table estimates seed_problem + sample / k; the variance of the seed
means minus that residual / P estimates tau^2; the variance over problems of the seed-averaged
difference minus each arm's residual / S estimates `problem`. Negative estimates are set to 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.seed_stats import minimum_detectable_effect, power_t

MAX_SEEDS = 1000
"""`seeds_needed` gives up beyond this many seeds per arm."""


@dataclass(frozen=True)
class Variances:
    """Variance components of a two-arm comparison on one benchmark (module docstring)."""

    seed_a: float
    seed_b: float
    seed_problem: float
    sample: float
    problem: float

    def seed_mean_vars(self, problems: int, samples: int) -> tuple[float, float]:
        """(V_a, V_b): the variance of one seed's mean score of each arm at `problems` x `samples`."""
        cell = (self.seed_problem + self.sample / samples) / problems
        return self.seed_a + cell, self.seed_b + cell


@dataclass(frozen=True)
class Design:
    """A comparison's size: seeds per arm, problems, samples per problem."""

    seeds: int
    problems: int
    samples: int


def welch_se_df(var: Variances, design: Design) -> tuple[float, float]:
    """Standard error and Welch-Satterthwaite degrees of freedom of the seed-level difference."""
    va, vb = (v / design.seeds for v in var.seed_mean_vars(design.problems, design.samples))
    se = math.sqrt(va + vb)
    if design.seeds < 2:
        return se, math.nan
    df = (va + vb) ** 2 / ((va**2 + vb**2) / (design.seeds - 1)) if va + vb > 0 else math.inf
    return se, df


def population_se(var: Variances, design: Design) -> float:
    """Standard error of the difference over fresh seeds and fresh problems (the bootstrap's)."""
    se, _ = welch_se_df(var, design)
    return math.sqrt(se**2 + var.problem / design.problems)


def mde(var: Variances, design: Design, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest difference both intervals exclude 0 for with probability `power` (approx.):
    the larger of the Welch t's and the population interval's minimum detectable effects."""
    se, df = welch_se_df(var, design)
    return max(
        minimum_detectable_effect(se, df, alpha, power),
        minimum_detectable_effect(population_se(var, design), math.inf, alpha, power),
    )


def rule_power(diff: float, var: Variances, design: Design, alpha: float = 0.05) -> float:
    """The smaller of the two tests' powers at a true difference `diff` (module docstring)."""
    se, df = welch_se_df(var, design)
    return min(power_t(diff, se, df, alpha), power_t(diff, population_se(var, design), math.inf, alpha))


def seeds_needed(
    diff: float, var: Variances, problems: int, samples: int, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """The fewest seeds per arm (>= 2) at which `rule_power` reaches `power`; None when even
    MAX_SEEDS do not (the problem side alone can cap the power: more problems are needed)."""
    for seeds in range(2, MAX_SEEDS + 1):
        if rule_power(diff, var, Design(seeds, problems, samples), alpha) >= power:
            return seeds
    return None


def _two_way(x_S_P: np.ndarray) -> tuple[float, float]:
    """(residual mean square, variance of the seed means) of one arm's seeds x problems table."""
    n_seeds, n_problems = x_S_P.shape
    resid = x_S_P - x_S_P.mean(axis=1, keepdims=True) - x_S_P.mean(axis=0, keepdims=True) + x_S_P.mean()
    ms_resid = float((resid**2).sum() / ((n_seeds - 1) * (n_problems - 1)))
    return ms_resid, float(x_S_P.mean(axis=1).var(ddof=1))


def estimate_variances(a_S_P: Any, b_S_P: Any, k: int) -> Variances:
    """Variance components from a pilot's cells (fractions correct of `k` samples; the same
    problems for both arms, at least 2 seeds each, k >= 2); see the module docstring."""
    a, b = np.asarray(a_S_P, dtype=float), np.asarray(b_S_P, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(
            f"both arms need [seeds, problems] scores on the same problems, got {a.shape}, {b.shape}"
        )
    if min(a.shape[0], b.shape[0]) < 2 or a.shape[1] < 2:
        raise ValueError("a pilot needs at least 2 seeds per arm and 2 problems")
    if k < 2:
        raise ValueError(
            "separating sampling noise from seed-by-problem variance needs k >= 2 samples per problem"
        )
    sample = float(np.concatenate([(x * (1 - x)).ravel() for x in (a, b)]).mean() * k / (k - 1))
    (res_a, seeds_a), (res_b, seeds_b) = _two_way(a), _two_way(b)
    n_problems = a.shape[1]
    diff_P = a.mean(axis=0) - b.mean(axis=0)
    return Variances(
        seed_a=max(0.0, seeds_a - res_a / n_problems),
        seed_b=max(0.0, seeds_b - res_b / n_problems),
        seed_problem=max(0.0, (res_a + res_b) / 2 - sample / k),
        sample=sample,
        problem=max(0.0, float(diff_P.var(ddof=1)) - res_a / a.shape[0] - res_b / b.shape[0]),
    )
