"""Scores and uncertainty for evaluations: pass@k, avg@k, confidence intervals, paired bootstrap.

Conventions (numpy only):
- A *correct matrix* has one row per problem and one column per sample (0/1 or bool); rows
  may differ in length when given as a list of lists.
- Confidence intervals are over *problems*: the per-problem score (e.g. the fraction of a
  problem's k samples that are correct) is the unit of resampling, because problems, not
  samples, are what a benchmark draws from its population.
- A/B comparisons on the same problems use the paired bootstrap (resample problem indices
  jointly), which removes the between-problem variance shared by both systems.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

_BOOT_CHUNK_CELLS = 2_000_000
"""Bootstrap replicates are drawn in chunks of at most this many indices (bounds memory)."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from `n` samples of which `c` are correct (Chen et al., 2021).

    pass@k = 1 - C(n-c, k) / C(n, k), evaluated as the product 1 - prod_{i=n-c+1}^{n} (1 - k/i),
    which never forms the (huge) binomial coefficients. Requires 0 <= c <= n and 1 <= k <= n.
    """
    if not (0 <= c <= n) or not (1 <= k <= n):
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _rows(correct: Any) -> list[np.ndarray]:
    """A correct matrix as a list of float rows (each non-empty)."""
    rows = [np.asarray(r, dtype=float).ravel() for r in correct]
    if not rows or any(r.size == 0 for r in rows):
        raise ValueError("a correct matrix needs at least one problem and one sample per problem")
    return rows


def per_problem_pass1(correct: Any) -> np.ndarray:
    """Per-problem Pass@1 estimates: the fraction of each problem's samples that are correct."""
    return np.array([r.mean() for r in _rows(correct)])


def avg_at_k(correct: Any) -> float:
    """avg@k, the paper's metric: mean over problems of the per-problem fraction correct (Pass@1)."""
    return float(per_problem_pass1(correct).mean())


def _values(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Per-problem scores as a non-empty 1-d float array."""
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        raise ValueError("no values")
    return x


def mean_stderr_ci(
    values: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    bounds: tuple[float, float] | None = None,
) -> dict[str, float]:
    """Mean, standard error and normal-approximation CI of per-problem scores.

    stderr = sample std (ddof=1) / sqrt(n); CI = mean -+ z * stderr with z the two-sided
    normal quantile (1.96 at 95%). Adequate for n of a few dozen problems or more; for few
    problems or scores near 0 or 1 prefer `bootstrap_ci`. With n = 1 the stderr is NaN.
    `bounds=(lo, hi)`: the range the scores live in (pass rates: (0, 1)); the CI is clipped
    to it, since the normal interval of a mean near an edge can cross it.
    """
    x = _values(values)
    mean = float(x.mean())
    stderr = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else float("nan")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    low, high = mean - z * stderr, mean + z * stderr
    if bounds is not None:  # NaN (n = 1) stays NaN: max/min would silently replace it
        low = low if math.isnan(low) else max(low, bounds[0])
        high = high if math.isnan(high) else min(high, bounds[1])
    return {
        "mean": mean,
        "stderr": stderr,
        "ci_low": low,
        "ci_high": high,
        "n": int(x.size),
        "confidence": confidence,
    }


def _boot_means(columns: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the column means of `columns` (n rows; resampling rows jointly).

    Returns shape (n_boot, columns.shape[1]).
    """
    n = columns.shape[0]
    out = np.empty((n_boot, columns.shape[1]))
    chunk = max(1, _BOOT_CHUNK_CELLS // n)
    for start in range(0, n_boot, chunk):
        stop = min(n_boot, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))  # (chunk, n) resampled problem indices
        out[start:stop] = columns[idx].mean(axis=1)
    return out


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, n_boot: int = 10000, seed: int = 0, confidence: float = 0.95
) -> dict[str, float]:
    """Percentile-bootstrap CI of the mean of per-problem scores (problems resampled with replacement)."""
    x = _values(values)
    boots = _boot_means(x[:, None], n_boot, np.random.default_rng(seed))[:, 0]
    alpha = (1 - confidence) / 2
    return {
        "mean": float(x.mean()),
        "ci_low": float(np.quantile(boots, alpha)),
        "ci_high": float(np.quantile(boots, 1 - alpha)),
        "n": int(x.size),
        "n_boot": n_boot,
        "confidence": confidence,
    }


def paired_bootstrap(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    n_boot: int = 10000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, float]:
    """Paired bootstrap for "A scores higher than B" on the same problems (a[i], b[i] = problem i).

    Returns `diff` = mean(a) - mean(b), its percentile CI (`ci_low`, `ci_high`), and a
    two-sided `p_value` for diff = 0: the bootstrap distribution of the difference is
    centred on 0 (the null) and p = (1 + #{|d*_b - diff| >= |diff|}) / (n_boot + 1).
    """
    x, y = _values(a), _values(b)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need equal lengths, got {x.size} and {y.size}")
    d = x - y
    diff = float(d.mean())
    boots = _boot_means(d[:, None], n_boot, np.random.default_rng(seed))[:, 0]
    alpha = (1 - confidence) / 2
    extreme = int(np.sum(np.abs(boots - diff) >= abs(diff) - 1e-12))
    return {
        "diff": diff,
        "ci_low": float(np.quantile(boots, alpha)),
        "ci_high": float(np.quantile(boots, 1 - alpha)),
        "p_value": (1 + extreme) / (n_boot + 1),
        "n": int(x.size),
        "n_boot": n_boot,
    }
