"""`benchmarks.stats`: pass@k against closed forms and brute force, avg@k, and the coverage
and power of the confidence intervals and the paired bootstrap on known distributions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from benchmarks.stats import (
    avg_at_k,
    bootstrap_ci,
    mean_stderr_ci,
    paired_bootstrap,
    pass_at_k,
    per_problem_pass1,
)

# ----------------------------------------------------------------------------- pass@k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """Fraction of the k-subsets of n samples (the first c correct) that hold a correct sample."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_at_k_matches_enumeration_over_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_matches_closed_form():
    for n in range(1, 25):
        for c in range(n + 1):
            for k in range(1, n + 1):
                closed = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)


def test_pass_at_k_edge_cases():
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 10, 1) == 1.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 1, 10) == 1.0  # k = n: the only subset is everything
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the fraction correct
    for bad in ((5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_pass_at_k_stable_for_large_n():
    n, c, k = 10_000, 30, 200
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)  # Python ints: exact, then one rounding
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-10)
    assert 0.0 < pass_at_k(100_000, 1, 1) < 1e-4


# ----------------------------------------------------------------------------- avg@k


def test_avg_at_k_is_mean_of_per_problem_pass1():
    correct = [[1, 0, 1, 1], [0, 0, 0, 0], [True, True, True, True]]
    assert avg_at_k(correct) == pytest.approx((0.75 + 0 + 1) / 3)
    assert np.allclose(per_problem_pass1(correct), [0.75, 0.0, 1.0])
    assert avg_at_k(np.array(correct)) == avg_at_k(correct)
    rows = [[1, 0], [1, 1, 1, 0]]  # ragged: each problem weighs the same regardless of its k
    assert avg_at_k(rows) == pytest.approx((0.5 + 0.75) / 2)
    assert avg_at_k(rows) == pytest.approx(np.mean([pass_at_k(len(r), sum(r), 1) for r in rows]))
    with pytest.raises(ValueError):
        avg_at_k([])
    with pytest.raises(ValueError):
        avg_at_k([[1], []])


# ----------------------------------------------------------------------------- intervals


def test_mean_stderr_ci_values():
    out = mean_stderr_ci([0.0, 1.0, 1.0, 0.0])
    stderr = np.std([0, 1, 1, 0], ddof=1) / 2
    assert out["mean"] == 0.5 and out["stderr"] == pytest.approx(stderr)
    assert out["ci_low"] == pytest.approx(0.5 - 1.959964 * stderr, abs=1e-5)
    assert out["ci_high"] == pytest.approx(0.5 + 1.959964 * stderr, abs=1e-5)
    assert mean_stderr_ci([0.5], confidence=0.9)["n"] == 1 and math.isnan(mean_stderr_ci([0.5])["stderr"])


def test_mean_stderr_ci_clips_to_bounds():
    # mean 0.9, stderr sqrt(0.1)/sqrt(10) = 0.1 -> unclipped [0.704, 1.096]; only the top crosses
    scores = [1.0] * 9 + [0.0]
    free, clipped = mean_stderr_ci(scores), mean_stderr_ci(scores, bounds=(0.0, 1.0))
    assert free["ci_high"] == pytest.approx(0.9 + 1.959964 * 0.1, abs=1e-5) and clipped["ci_high"] == 1.0
    assert clipped["ci_low"] == free["ci_low"] == pytest.approx(0.9 - 1.959964 * 0.1, abs=1e-5)
    one = mean_stderr_ci([1.0], bounds=(0.0, 1.0))  # n = 1: no interval, not a clipped [1, 1]
    assert math.isnan(one["ci_low"]) and math.isnan(one["ci_high"])


def test_normal_ci_coverage_on_bernoulli():
    """The 95% CI of 100 Bernoulli(0.3) scores contains 0.3 in ~95% of 400 seeded repetitions."""
    rng = np.random.default_rng(1234)
    hits = 0
    for _ in range(400):
        out = mean_stderr_ci(rng.random(100) < 0.3)
        hits += out["ci_low"] <= 0.3 <= out["ci_high"]
    assert 0.90 <= hits / 400 <= 0.99


def test_bootstrap_ci_coverage_and_determinism():
    rng = np.random.default_rng(99)
    hits = 0
    for rep in range(200):
        out = bootstrap_ci(rng.random(100) < 0.3, n_boot=1000, seed=rep)
        hits += out["ci_low"] <= 0.3 <= out["ci_high"]
    assert 0.88 <= hits / 200 <= 0.99
    x = rng.random(50)
    assert bootstrap_ci(x, n_boot=2000, seed=3) == bootstrap_ci(x, n_boot=2000, seed=3)
    out, normal = bootstrap_ci(x, n_boot=4000, seed=0), mean_stderr_ci(x)
    assert out["ci_low"] < out["mean"] < out["ci_high"]
    assert out["ci_high"] - out["ci_low"] == pytest.approx(normal["ci_high"] - normal["ci_low"], rel=0.2)


# ----------------------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_detects_a_real_difference():
    rng = np.random.default_rng(7)
    b = (rng.random(200) < 0.5).astype(float)
    a = np.maximum(b, rng.random(200) < 0.25)  # A solves what B solves, plus ~12% more
    out = paired_bootstrap(a, b, n_boot=5000, seed=0)
    assert out["diff"] == pytest.approx(a.mean() - b.mean()) and out["diff"] > 0.08
    assert out["ci_low"] > 0 and out["p_value"] < 0.01
    reverse = paired_bootstrap(b, a, n_boot=5000, seed=0)
    assert reverse["diff"] == pytest.approx(-out["diff"]) and reverse["ci_high"] < 0


def test_paired_bootstrap_does_not_flag_a_null_difference():
    rng = np.random.default_rng(11)
    skill = rng.random(150)  # per-problem difficulty shared by both systems
    a = (rng.random(150) < skill).astype(float)
    b = (rng.random(150) < skill).astype(float)
    out = paired_bootstrap(a, b, n_boot=5000, seed=0)
    assert out["ci_low"] < 0 < out["ci_high"] and out["p_value"] > 0.05
    # Under the null the false-positive rate at 5% stays near 5% (100 seeded repetitions).
    rejections = 0
    for rep in range(100):
        a = (rng.random(100) < 0.4).astype(float)
        b = (rng.random(100) < 0.4).astype(float)
        rejections += paired_bootstrap(a, b, n_boot=1000, seed=rep)["p_value"] < 0.05
    assert rejections <= 12
    assert paired_bootstrap(a, a, n_boot=100)["p_value"] == 1.0
    with pytest.raises(ValueError, match="equal lengths"):
        paired_bootstrap([1.0, 0.0], [1.0])
