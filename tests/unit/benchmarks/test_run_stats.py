"""`benchmarks.run_stats`: IQM and probability of improvement against hand-computed values, the
bootstraps against slow reference loops on the same random draws, and the coverage of the
two-level (seeds x problems) interval on data with a known mean."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import run_stats
from benchmarks.run_stats import (
    format_p,
    iqm,
    iqm_ci,
    p_floor,
    paired_difference,
    probability_of_improvement,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
    two_level_boot_means,
)
from benchmarks.stats import bootstrap_ci

# ----------------------------------------------------------------------------- IQM


def trimmed_mean_by_hand(values: list[float]) -> float:
    """scipy.stats.trim_mean(values, 0.25): drop int(0.25 * n) sorted values from each end."""
    v = sorted(values)
    cut = int(0.25 * len(v))
    kept = v[cut : len(v) - cut]
    return sum(kept) / len(kept)


def test_iqm_hand_computed_values():
    assert iqm([4.0, 1.0, 3.0, 2.0]) == 2.5  # n = 4: drop 1 and 4, mean of 2 and 3
    assert iqm([8, 1, 7, 2, 6, 3, 5, 4]) == 4.5  # n = 8: drop 1, 2 and 7, 8
    assert iqm([0.0, 0.0, 1.0, 1.0, 100.0, -50.0, 0.5, 0.5]) == pytest.approx(0.5)  # outliers trimmed
    # n = 10: int(2.5) = 2 dropped from each end, the middle 6 averaged, 37/6. No fractional
    # weights: an exact-25% trim would also drop half of the 3rd and 8th values and give 31/5.
    ten = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 50.0]
    assert iqm(ten) == pytest.approx((3 + 4 + 6 + 7 + 8 + 9) / 6)
    fractional = (0.5 * 3 + 4 + 6 + 7 + 8 + 0.5 * 9) / 5
    assert iqm(ten) != pytest.approx(fractional)
    for n in (1, 2, 3):  # int(0.25 n) = 0: the plain mean
        assert iqm(list(range(n))) == pytest.approx(np.mean(range(n)))


def test_iqm_matches_direct_trim_and_flattens():
    rng = np.random.default_rng(0)
    for n in range(1, 30):
        x = rng.normal(size=n)
        assert iqm(x) == pytest.approx(trimmed_mean_by_hand(list(x)), abs=1e-12)
    x_S_M = rng.random((5, 3))  # per-seed-per-benchmark scores: one pool of 15 (drop 3 each end)
    assert iqm(x_S_M) == pytest.approx(trimmed_mean_by_hand(list(x_S_M.ravel())))
    with pytest.raises(ValueError):
        iqm([])
    with pytest.raises(ValueError, match="finite"):
        iqm([0.5, float("nan")])


def test_iqm_ci_matches_reference_loop_and_resamples_whole_seeds():
    rng = np.random.default_rng(1)
    x_S_M = rng.random((4, 3))
    out = iqm_ci(x_S_M, n_boot=300, seed=5)
    draws = np.random.default_rng(5).integers(0, 4, size=(300, 4))  # one chunk: the same draws
    boots = [trimmed_mean_by_hand(list(x_S_M[rows].ravel())) for rows in draws]
    assert out["ci_low"] == pytest.approx(np.quantile(boots, 0.025), abs=1e-12)
    assert out["ci_high"] == pytest.approx(np.quantile(boots, 0.975), abs=1e-12)
    assert out["iqm"] == pytest.approx(iqm(x_S_M)) and (out["n_seeds"], out["n_scores"]) == (4, 12)
    assert iqm_ci(x_S_M, n_boot=300, seed=5) == out
    one = iqm_ci([0.4, 0.4, 0.4], n_boot=100)  # per-seed scores (1-d), no spread: a point
    assert one["iqm"] == one["ci_low"] == one["ci_high"] == pytest.approx(0.4)


# ----------------------------------------------------------------------------- probability of improvement


def poi_by_hand(a: list[float], b: list[float]) -> float:
    """Mann-Whitney U / (n m) with ties counting 1/2, by enumerating every pair of runs."""
    score = sum(1.0 if x > y else 0.5 if x == y else 0.0 for x in a for y in b)
    return score / (len(a) * len(b))


def test_probability_of_improvement_hand_computed():
    # a=1 beats only 0; a=2 ties both 2s and beats 0; a=3 beats all: (1 + 2 + 3) / 9
    assert probability_of_improvement([1, 2, 3], [2, 2, 0]) == pytest.approx(6 / 9)
    assert probability_of_improvement([2, 2, 0], [1, 2, 3]) == pytest.approx(3 / 9)
    assert probability_of_improvement([0.5, 0.5], [0.5, 0.5, 0.5]) == 0.5  # all ties
    assert probability_of_improvement([0.1, 0.7, 0.3], [0.1, 0.7, 0.3]) == 0.5  # identical arms
    assert probability_of_improvement([1.0, 0.9], [0.1, 0.2, 0.3]) == 1.0
    # two benchmarks: 6/9 on the first, 1 on the second -> averaged as rliable does
    a_S_M, b_S_M = [[1, 5], [2, 5], [3, 5]], [[2, 0], [2, 0], [0, 0]]
    assert probability_of_improvement(a_S_M, b_S_M) == pytest.approx((6 / 9 + 1) / 2)
    with pytest.raises(ValueError, match="same benchmarks"):
        probability_of_improvement(a_S_M, [[0.0], [1.0]])


def test_probability_of_improvement_matches_enumeration():
    rng = np.random.default_rng(2)
    for _ in range(20):
        a = rng.integers(0, 4, size=rng.integers(1, 7)) / 4
        b = rng.integers(0, 4, size=rng.integers(1, 7)) / 4
        assert probability_of_improvement(a, b) == pytest.approx(poi_by_hand(list(a), list(b)))
        assert probability_of_improvement(a, b) + probability_of_improvement(b, a) == pytest.approx(1.0)


@pytest.mark.parametrize("paired", [False, True])
def test_probability_of_improvement_ci_matches_reference_loop(paired):
    rng = np.random.default_rng(3)
    a_S_M, b_S_M = rng.integers(0, 5, size=(4, 2)) / 4, rng.integers(0, 5, size=(4, 2)) / 4
    out = probability_of_improvement_ci(a_S_M, b_S_M, n_boot=200, seed=9, paired=paired)
    draws = np.random.default_rng(9)
    idx_a = draws.integers(0, 4, size=(200, 4))
    idx_b = idx_a if paired else draws.integers(0, 4, size=(200, 4))
    boots = [
        np.mean([poi_by_hand(list(a_S_M[ia, m]), list(b_S_M[ib, m])) for m in range(2)])
        for ia, ib in zip(idx_a, idx_b)
    ]
    assert out["ci_low"] == pytest.approx(np.quantile(boots, 0.025), abs=1e-12)
    assert out["ci_high"] == pytest.approx(np.quantile(boots, 0.975), abs=1e-12)
    assert out["poi"] == pytest.approx(probability_of_improvement(a_S_M, b_S_M))
    assert (out["n_seeds_a"], out["n_seeds_b"], out["n_benchmarks"]) == (4, 4, 2)
    with pytest.raises(ValueError, match="equal seed counts"):
        probability_of_improvement_ci([0.1, 0.2], [0.3], paired=True)


def test_probability_of_improvement_ci_clear_winner():
    out = probability_of_improvement_ci([0.8, 0.9, 0.85], [0.1, 0.2, 0.15], n_boot=500)
    assert out["poi"] == out["ci_low"] == out["ci_high"] == 1.0


# ----------------------------------------------------------------------------- two-level bootstrap


def reference_two_level(x_S_P: np.ndarray, n_boot: int, seed: int, chunk: int) -> np.ndarray:
    """One replicate at a time: draw seeds and problems (same generators and chunks), average cells."""
    n_seeds, n_problems = x_S_P.shape
    rng_problems = np.random.default_rng(seed)
    rng_seeds = np.random.default_rng([seed, run_stats._SEED_STREAM])
    out = []
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        problems = rng_problems.integers(0, n_problems, size=(size, n_problems))
        seeds = rng_seeds.integers(0, n_seeds, size=(size, n_seeds))
        for r in range(size):
            cells = [x_S_P[s, p] for s in seeds[r] for p in problems[r]]
            out.append(sum(cells) / len(cells))
    return np.array(out)


def test_two_level_bootstrap_matches_reference_loop_over_several_chunks(monkeypatch):
    x_S_P = np.random.default_rng(4).random((3, 10))
    monkeypatch.setattr(run_stats, "_BOOT_CHUNK_CELLS", 70)  # 7 replicates a chunk, 5 chunks
    fast = two_level_boot_means(x_S_P, 33, seed=2)
    assert np.allclose(fast, reference_two_level(x_S_P, 33, seed=2, chunk=7), rtol=0, atol=1e-12)


def test_stratified_bootstrap_ci_determinism_and_problem_bootstrap_limit():
    rng = np.random.default_rng(5)
    x_S_P = (rng.random((3, 200, 4)) < rng.random((1, 200, 1))).mean(axis=2)  # 4 samples a problem
    out = stratified_bootstrap_ci(x_S_P, n_boot=2000, seed=1)
    assert out == stratified_bootstrap_ci(x_S_P, n_boot=2000, seed=1)
    assert out["mean"] == pytest.approx(x_S_P.mean()) and out["ci_low"] < out["mean"] < out["ci_high"]
    assert (out["n_seeds"], out["n_problems"], out["n_boot"], out["confidence"]) == (3, 200, 2000, 0.95)
    assert stratified_bootstrap_ci(x_S_P, n_boot=2000, seed=2) != out
    # One seed, or seeds that agree: exactly the problem bootstrap of `bootstrap_ci`.
    problems_only = bootstrap_ci(x_S_P[0], n_boot=2000, seed=1)
    for same in (x_S_P[:1], np.repeat(x_S_P[:1], 3, axis=0)):
        got = stratified_bootstrap_ci(same, n_boot=2000, seed=1)
        assert got["ci_low"] == pytest.approx(problems_only["ci_low"], abs=1e-12)
        assert got["ci_high"] == pytest.approx(problems_only["ci_high"], abs=1e-12)
    # Seed-to-seed spread widens the interval beyond the problem bootstrap of the seed means.
    spread = x_S_P + np.array([[-0.1], [0.0], [0.1]])
    wide = stratified_bootstrap_ci(spread, n_boot=2000)
    narrow = bootstrap_ci(spread.mean(axis=0), n_boot=2000)
    assert wide["ci_high"] - wide["ci_low"] > 1.5 * (narrow["ci_high"] - narrow["ci_low"])
    with pytest.raises(ValueError, match="seeds, problems"):
        stratified_bootstrap_ci([0.5, 0.5])
    with pytest.raises(ValueError, match="finite"):
        stratified_bootstrap_ci([[0.5, float("nan")]])


def test_stratified_bootstrap_ci_coverage():
    """Seed effects + problem effects + noise around a known mean: the 95% CI covers it ~95%."""
    rng = np.random.default_rng(6)
    hits = 0
    for rep in range(200):
        seed_S, problem_P = 0.03 * rng.normal(size=(5, 1)), 0.2 * rng.normal(size=(1, 60))
        x_S_P = 0.5 + seed_S + problem_P + 0.1 * rng.normal(size=(5, 60))
        out = stratified_bootstrap_ci(x_S_P, n_boot=400, seed=rep)
        hits += out["ci_low"] <= 0.5 <= out["ci_high"]
    assert 0.88 <= hits / 200 <= 0.99


# ----------------------------------------------------------------------------- paired difference


def test_paired_difference_identical_arms_and_constant_shift():
    # Seeds that agree: the seed resamples change nothing, so the interval is the problem-paired
    # bootstrap of the cell differences (zero width for a constant shift).
    rng = np.random.default_rng(7)
    b_S_P = np.repeat(rng.integers(0, 5, size=(1, 100)) / 8, 3, axis=0)  # multiples of 1/8: exact
    same = paired_difference(b_S_P, b_S_P, n_boot=500)
    assert same["diff"] == same["ci_low"] == same["ci_high"] == 0.0
    assert same["p_value"] == 1.0 and same["verdict"] == "not distinguishable"
    up = paired_difference(b_S_P + 0.25, b_S_P, n_boot=500)
    assert up["diff"] == pytest.approx(0.25) and (up["ci_low"], up["ci_high"]) == pytest.approx((0.25, 0.25))
    assert up["verdict"] == "better" and up["p_value"] == 1 / 501
    assert up["mean_a"] == pytest.approx(b_S_P.mean() + 0.25) and up["mean_b"] == pytest.approx(b_S_P.mean())
    down = paired_difference(b_S_P, b_S_P + 0.25, n_boot=500)
    assert down["diff"] == pytest.approx(-0.25) and down["verdict"] == "worse"
    # Seeds are not paired across arms: seed counts may differ, problems may not.
    assert paired_difference(b_S_P, b_S_P[:2], n_boot=200)["n_seeds_b"] == 2
    with pytest.raises(ValueError, match="same problems"):
        paired_difference(b_S_P, b_S_P[:, :50])


def reference_arm_boots(arms: list[np.ndarray], n_boot: int, seed: int) -> np.ndarray:
    """One replicate at a time (one chunk): shared problem draws, each arm's own seed draws."""
    n_problems = arms[0].shape[1]
    problems = np.random.default_rng(seed).integers(0, n_problems, size=(n_boot, n_problems))
    out = np.empty((n_boot, len(arms)))
    for i, x_S_P in enumerate(arms):
        rng = np.random.default_rng([seed, run_stats._SEED_STREAM] + ([i] if i else []))
        seeds = rng.integers(0, x_S_P.shape[0], size=(n_boot, x_S_P.shape[0]))
        for r in range(n_boot):
            out[r, i] = np.mean([x_S_P[s, p] for s in seeds[r] for p in problems[r]])
    return out


def test_paired_difference_shares_problem_draws_and_resamples_each_arm_s_seeds_alone():
    rng = np.random.default_rng(8)
    a_S_P, b_S_P = rng.random((3, 50)), rng.random((4, 50))
    out = paired_difference(a_S_P, b_S_P, n_boot=300, seed=4)
    ref = reference_arm_boots([a_S_P, b_S_P], 300, 4)
    boots = ref[:, 0] - ref[:, 1]
    assert out["diff"] == pytest.approx(a_S_P.mean() - b_S_P.mean())
    assert out["ci_low"] == pytest.approx(np.quantile(boots, 0.025), abs=1e-12)
    assert out["ci_high"] == pytest.approx(np.quantile(boots, 0.975), abs=1e-12)
    extreme = np.sum(np.abs(boots - out["diff"]) >= abs(out["diff"]) - 1e-12)
    assert out["p_value"] == pytest.approx((1 + extreme) / 301)
    assert np.allclose(ref[:, 0], two_level_boot_means(a_S_P, 300, 4), rtol=0, atol=1e-12)  # arm 0 alone


def test_the_p_value_floor_prints_as_an_inequality():
    assert p_floor(10000) == 1 / 10001
    assert format_p(1 / 10001, 10000) == "< 0.0001" and format_p(1 / 501, 500) == "< 0.002"
    assert format_p(0.0094, 10000) == "0.0094" and format_p(0.16268, 10000) == "0.163"
    assert format_p(1 / 10001) == "0.0001"  # without the bootstrap's size: a plain number


def test_paired_difference_detects_a_real_gain_and_not_a_null_one():
    rng = np.random.default_rng(9)
    skill_P = rng.random(300)  # problem difficulty shared by both arms
    b_S_P = (rng.random((3, 300, 4)) < skill_P[None, :, None]).mean(axis=2)
    a_S_P = (rng.random((3, 300, 4)) < np.minimum(1, skill_P + 0.1)[None, :, None]).mean(axis=2)
    gain = paired_difference(a_S_P, b_S_P, n_boot=2000)
    assert gain["verdict"] == "better" and gain["p_value"] < 0.01 and gain["diff"] > 0.05
    null_S_P = (rng.random((3, 300, 4)) < skill_P[None, :, None]).mean(axis=2)
    null = paired_difference(null_S_P, b_S_P, n_boot=2000)
    assert null["verdict"] == "not distinguishable" and null["p_value"] > 0.05
