"""Seed-level inference for a difference between two arms: what holds with 3 to 10 seeds.

The two-level bootstrap (`benchmarks.run_stats`) resamples seeds; with 3 seeds a resample is
one of 10 multisets and its interval is too narrow where seeds differ. Here the unit is the
training run: each seed's mean score over the benchmark's problems (the same problems for
every seed and arm, so the problem effects cancel in the difference), and the seeds of each arm
are independent draws. Shape suffixes: `_S` seeds, `_P` problems.

- `welch_interval`: Welch's t interval and two-sided p-value for mean(A) - mean(B) over per-seed
  means, with the Welch-Satterthwaite degrees of freedom (equal to scipy.stats.ttest_ind(a, b,
  equal_var=False)). Its target is the difference expected on these problems over fresh
  training seeds and evaluation samples; its calibration at 3, 5 and 10 seeds is shown by a
  simulation test (tests/unit/benchmarks/test_seed_stats.py) with seed and problem effects
  of the size the references measured.
- `seed_noise_test`: do an arm's seeds differ by more than evaluation noise? Under "no seed
  effect" a seed's mean varies only by its k samples per problem: var = sum_p p(1-p) / (k P^2),
  estimated without bias from the cells as x(1-x) / (k-1) per cell (E[x(1-x)] = p(1-p)(k-1)/k).
  (S-1) var(seed means) / noise variance is then chi-square with S-1 degrees of freedom.
  `seed_noise_bound_test` works from per-seed means alone (the committed per_seed.csv tables):
  it uses the bound sum_p p(1-p) <= P m(1-m) (Jensen), which overstates the noise and so
  flags less often; a flag from it is certain, its absence is not.
- Common sampling seeds: this harness evaluates every run with one evaluation seed (samples
  paired across arms), so the runs' sampling noise is partly shared. Then the seed means vary
  less than independent noise would make them, the noise test is conservative, and Welch's
  target is the difference under those sampling draws; the bootstrap, which resamples the
  problems with their samples, carries that part of the uncertainty, hence a verdict needs both.
- `minimum_detectable_effect`: the difference a two-sided level-alpha test detects with the
  given power: (t_{1-alpha/2, df} + t_{power, df}) x standard error (normal quantiles when df
  is infinite), the usual approximation of the noncentral-t power (`power_t` gives it exactly).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats as sps


def _seed_means(x: Any) -> np.ndarray:
    """Per-seed means (seeds on the last axis) as a finite float array."""
    a = np.asarray(x, dtype=float)
    if a.size == 0 or a.ndim == 0 or not np.all(np.isfinite(a)):
        raise ValueError("per-seed means must be a non-empty array of finite numbers")
    return a


def welch_interval(a_S: Any, b_S: Any, confidence: float = 0.95) -> dict[str, Any]:
    """Welch's t for mean(`a_S`) - mean(`b_S`) (per-seed means of two arms, counts may differ).

    Keys: diff, se, df, ci_low, ci_high, p_value (two-sided), n_seeds_a, n_seeds_b: floats for
    1-d inputs; for a batch of comparisons (seeds on the last axis, e.g. (N, S)) arrays over the
    batch. Needs two seeds per arm (NaN interval and p otherwise). Zero spread in both arms: a
    point interval and p = 0 (or 1 when the means are equal).
    """
    a, b = _seed_means(a_S), _seed_means(b_S)
    n_a, n_b = a.shape[-1], b.shape[-1]
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    if min(n_a, n_b) < 2:
        nan = np.full_like(diff, math.nan)
        se = df = low = high = p = nan
    else:
        va, vb = a.var(axis=-1, ddof=1) / n_a, b.var(axis=-1, ddof=1) / n_b
        se = np.sqrt(va + vb)
        flat = se <= 1e-12  # identical seeds (up to rounding): no spread to scale by
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(flat, math.inf, (va + vb) ** 2 / (va**2 / (n_a - 1) + vb**2 / (n_b - 1)))
            half = sps.t.ppf(0.5 + confidence / 2, df) * se
            p = np.where(flat, (diff == 0).astype(float), 2 * sps.t.sf(np.abs(diff) / se, df))
        low, high = diff - np.where(flat, 0.0, half), diff + np.where(flat, 0.0, half)
    out = {"diff": diff, "se": se, "df": df, "ci_low": low, "ci_high": high, "p_value": p}
    if a.ndim == 1 and b.ndim == 1:
        out = {key: float(value) for key, value in out.items()}
    return {**out, "n_seeds_a": n_a, "n_seeds_b": n_b}


def _chi2_result(seed_means: np.ndarray, noise_var: float) -> dict[str, float]:
    """(S-1) var(seed means) / noise_var against chi-square(S-1): the upper-tail p-value."""
    n = seed_means.size
    seed_sd = float(seed_means.std(ddof=1)) if n > 1 else math.nan
    out = {"seed_sd": seed_sd, "noise_sd": math.sqrt(noise_var), "n_seeds": n}
    if n < 2 or noise_var <= 0:
        return {**out, "chi2": math.nan, "p_value": math.nan}
    chi2 = (n - 1) * seed_sd**2 / noise_var
    return {**out, "chi2": chi2, "p_value": float(sps.chi2.sf(chi2, n - 1))}


def seed_noise_test(x_S_P: Any, k: int) -> dict[str, float]:
    """Whether the seeds of one arm differ beyond evaluation noise (module docstring).

    `x_S_P`: fraction correct of each (seed, problem) cell, each from `k` samples (k >= 2).
    Keys: seed_sd (of the seed means), noise_sd (expected from the samples alone), chi2,
    p_value, n_seeds.
    """
    x = np.asarray(x_S_P, dtype=float)
    if x.ndim != 2 or x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"scores must be a finite [seeds, problems] array, got shape {x.shape}")
    if k < 2:
        raise ValueError("the evaluation noise of a cell needs k >= 2 samples per problem")
    noise_var = float((x * (1 - x) / (k - 1)).sum(axis=1).mean()) / x.shape[1] ** 2
    return _chi2_result(x.mean(axis=1), noise_var)


def seed_noise_bound_test(seed_means: Any, k: int, n_problems: int) -> dict[str, float]:
    """`seed_noise_test` from per-seed means alone, with the noise bound m(1-m) / (k P), m the
    arm's mean: conservative (module docstring). Same keys."""
    m_S = _seed_means(seed_means)
    m = float(m_S.mean())
    return _chi2_result(m_S, m * (1 - m) / (k * n_problems))


def _quantiles(alpha: float, power: float, df: float) -> tuple[float, float]:
    if math.isinf(df):
        return float(sps.norm.ppf(1 - alpha / 2)), float(sps.norm.ppf(power))
    return float(sps.t.ppf(1 - alpha / 2, df)), float(sps.t.ppf(power, df))


def minimum_detectable_effect(
    se: float, df: float = math.inf, alpha: float = 0.05, power: float = 0.8
) -> float:
    """The difference a two-sided level-`alpha` test with standard error `se` and `df` degrees
    of freedom detects with probability `power`: (q_{1-alpha/2} + q_power) x se."""
    crit, beta = _quantiles(alpha, power, df)
    return (crit + beta) * se


def power_t(diff: float, se: float, df: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided t test at a true difference `diff` (noncentral t with
    noncentrality diff / se; normal when df is infinite)."""
    if se <= 0:
        return 1.0 if diff != 0 else alpha
    shift = diff / se
    if math.isinf(df):
        crit = float(sps.norm.ppf(1 - alpha / 2))
        return float(sps.norm.sf(crit - shift) + sps.norm.cdf(-crit - shift))
    crit = float(sps.t.ppf(1 - alpha / 2, df))
    return float(sps.nct.sf(crit, df, shift) + sps.nct.cdf(-crit, df, shift))
