"""Holm's adjustment against a hand computation and against its definition as a closed test
of Bonferroni tests; BH (scipy) shown to differ, which is why the verdict table uses Holm."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from benchmarks.multiplicity import holm, holm_levels


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.2 (m = 4): 4 x 0.01 = 0.04, 3 x 0.02 = 0.06, 2 x 0.03 = 0.06,
    # 1 x 0.2 = 0.2; running maximum: 0.04, 0.06, 0.06, 0.2; back in input order
    assert holm([0.03, 0.2, 0.01, 0.02]) == pytest.approx([0.06, 0.2, 0.04, 0.06])
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.0007]) == pytest.approx([0.0007])  # a family of one is not adjusted
    assert holm_levels([0.03, 0.2, 0.01, 0.02]) == pytest.approx([0.05 / 2, 0.05, 0.05 / 4, 0.05 / 3])
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        holm([0.1, 1.5])


def closed_bonferroni(p: list[float], i: int, alpha: float) -> bool:
    """Hypothesis i is rejected iff every intersection containing it is rejected by Bonferroni."""
    m = len(p)
    for size in range(1, m + 1):
        for subset in itertools.combinations(range(m), size):
            if i in subset and min(p[j] for j in subset) > alpha / size:
                return False
    return True


def test_holm_is_the_closed_test_of_bonferroni_tests():
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = list(rng.random(5) ** 3)
        adjusted = holm(p)
        for i in range(5):
            assert (adjusted[i] <= 0.05) == closed_bonferroni(p, i, 0.05)


def test_bh_is_less_strict_than_holm():
    p = [0.011, 0.012, 0.013, 0.2]
    # Holm: 4 x 0.011 = 0.044, then the running maximum holds it over 3 x 0.012 and 2 x 0.013
    assert holm(p) == pytest.approx([0.044, 0.044, 0.044, 0.2])
    # BH by hand: min over j >= i of m p_(j) / j: 4 x 0.013 / 3 = 0.01733 for the first three
    bh = false_discovery_control(p)
    assert list(bh) == pytest.approx([4 * 0.013 / 3] * 3 + [0.2])
    assert all(b <= h for b, h in zip(bh, holm(p)))
