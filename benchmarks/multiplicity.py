"""Multiplicity: Holm's step-down adjustment for a family of claims tested together.

Why Holm and not Benjamini-Hochberg: the family is a handful of confirmatory claims (the
paper's Table 1 rows, tuned), each of which a reader takes as established or not on its own.
Holm controls the family-wise error rate (the chance that any claim of the family is a false
positive) at alpha under any dependence between the tests, which these have (they share arms
and problems); BH controls the expected share of false discoveries among the claims made, the
right guarantee for screening many hypotheses, not for a few claims each read as a finding.

Holm (1979): order the m p-values p_(1) <= ... <= p_(m); the i-th is tested at alpha / (m - i + 1),
and the procedure stops at the first that fails. As adjusted p-values:
adjusted_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)), rejected iff adjusted < alpha.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the input's order (module docstring)."""
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1 or np.any((p < 0) | (p > 1)) or np.any(np.isnan(p)):
        raise ValueError(f"p-values must be numbers in [0, 1], got {list(p_values)}")
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(stepped)
    return adjusted.tolist()


def holm_levels(p_values: Sequence[float], alpha: float = 0.05) -> list[float]:
    """The level Holm tests each p-value at, in the input's order: alpha / (m - i + 1) for the
    i-th smallest (ties in input order). An interval at confidence 1 - level excludes the null
    value exactly where the test at that step rejects."""
    p = np.asarray(p_values, dtype=float)
    m = p.size
    levels = np.empty(m)
    levels[np.argsort(p, kind="stable")] = alpha / (m - np.arange(m))
    return levels.tolist()
