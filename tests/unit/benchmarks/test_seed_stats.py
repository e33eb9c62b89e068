"""`benchmarks.seed_stats`: Welch's interval against scipy and its coverage in simulated
comparisons at 3, 5 and 10 seeds; the between-seed noise test against a hand computation and
its false-alarm rate; the minimum detectable effect and the power function by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from benchmarks.seed_stats import (
    minimum_detectable_effect,
    power_t,
    seed_noise_bound_test,
    seed_noise_test,
    welch_interval,
)

# ----------------------------------------------------------------------------- Welch against scipy


def test_welch_interval_matches_scipy():
    a, b = [0.6625, 0.7225, 0.6975], [0.6625, 0.6725, 0.67, 0.655]
    out = welch_interval(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert out["p_value"] == pytest.approx(ref.pvalue, rel=1e-10) and out["df"] == pytest.approx(ref.df)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert out["diff"] == pytest.approx(np.mean(a) - np.mean(b))
    va, vb = np.var(a, ddof=1) / 3, np.var(b, ddof=1) / 4  # Welch-Satterthwaite by hand
    assert out["df"] == pytest.approx((va + vb) ** 2 / (va**2 / 2 + vb**2 / 3))
    assert out["se"] == pytest.approx(math.sqrt(va + vb))


def test_welch_interval_degenerate_cases():
    assert math.isnan(welch_interval([0.5], [0.4, 0.3])["p_value"])  # one seed: no seed-level interval
    flat = welch_interval([0.5, 0.5], [0.4, 0.4])
    assert flat["ci_low"] == flat["ci_high"] == pytest.approx(0.1) and flat["p_value"] == 0.0
    assert welch_interval([0.5, 0.5], [0.5, 0.5])["p_value"] == 1.0
    batch = welch_interval([[0.5, 0.6, 0.7], [0.5, 0.5, 0.5]], [[0.4, 0.5, 0.3], [0.4, 0.4, 0.4]])
    one = welch_interval([0.5, 0.6, 0.7], [0.4, 0.5, 0.3])
    assert batch["ci_low"][0] == pytest.approx(one["ci_low"]) and batch["p_value"][0] == pytest.approx(
        one["p_value"]
    )
    assert batch["ci_low"][1] == batch["ci_high"][1] == pytest.approx(0.1) and batch["p_value"][1] == 0.0
    with pytest.raises(ValueError, match="finite"):
        welch_interval([0.5, float("nan")], [0.4, 0.3])


# ----------------------------------------------------------------------------- calibration

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(20)  # E[f(Z)], Z ~ N(0, 1): sum(w f(x)) / sqrt(2 pi)


def _expected_score(theta_P: np.ndarray, seed_sd: float) -> np.ndarray:
    """E over seeds of sigmoid(theta + seed effect), seed effect ~ N(0, seed_sd^2), per problem."""
    z = theta_P[..., None] + seed_sd * GH_X
    return (1 / (1 + np.exp(-z))) @ GH_W / math.sqrt(2 * math.pi)


def simulate_coverage(n_seeds: int, seed_sd: tuple[float, float], n_sims: int, rng) -> float:
    """The share of simulated comparisons whose 95% Welch interval covers the true difference.

    Each comparison draws 200 problems (logits N(0.8, 1.5^2): scores from ~0 to ~1, mean ~0.65
    like arith's), arm B's logits = A's - 0.2 + an arm x problem effect N(0, 0.5^2), then for
    each arm `n_seeds` training seeds (a logit shift N(0, seed_sd^2) for every problem) and k = 2
    samples per (seed, problem). The true difference on these problems is the expectation over
    seeds and samples (Gauss-Hermite). Seed SDs 0.1 and 0.5 on the logit scale are ~0.02 and
    ~0.1 on the score scale: the spreads of SAO's seeds and of VAPO's in per_seed.csv.
    """
    n_problems, k = 200, 2
    theta_a_N_P = rng.normal(0.8, 1.5, size=(n_sims, n_problems))
    theta_b_N_P = theta_a_N_P - 0.2 + rng.normal(0, 0.5, size=(n_sims, n_problems))
    truth_N = (_expected_score(theta_a_N_P, seed_sd[0]) - _expected_score(theta_b_N_P, seed_sd[1])).mean(
        axis=1
    )
    means = []
    for theta_N_P, sd in ((theta_a_N_P, seed_sd[0]), (theta_b_N_P, seed_sd[1])):
        logits_N_S_P = theta_N_P[:, None, :] + sd * rng.normal(size=(n_sims, n_seeds, 1))
        correct_N_S_P = rng.binomial(k, 1 / (1 + np.exp(-logits_N_S_P)))
        means.append(correct_N_S_P.mean(axis=2) / k)  # per-seed mean scores (n_sims, n_seeds)
    out = welch_interval(means[0], means[1])  # the batch: one interval per comparison
    return float(np.mean((out["ci_low"] <= truth_N) & (truth_N <= out["ci_high"])))


@pytest.mark.parametrize("n_seeds", [3, 5, 10])
@pytest.mark.parametrize("seed_sd", [(0.1, 0.1), (0.1, 0.5)], ids=["equal", "unequal"])
def test_welch_interval_covers_the_true_difference_95_percent(n_seeds, seed_sd):
    # 3,000 comparisons per case: the coverage's standard error is 0.4 points. With 20,000 the
    # coverage at 3 seeds is 96.7% for equal spreads (Welch's df < 4 there: a little
    # conservative) and 94.6% for unequal ones.
    coverage = simulate_coverage(
        n_seeds, seed_sd, 3000, np.random.default_rng(n_seeds * 10 + int(10 * seed_sd[1]))
    )
    assert 0.93 <= coverage <= 0.97, coverage


# ----------------------------------------------------------------------------- seeds beyond noise


def test_seed_noise_test_by_hand():
    # 2 seeds x 2 problems, k = 2: cells 1, 0.5 / 0.5, 0.5; seed means 0.75, 0.5
    x_S_P = [[1.0, 0.5], [0.5, 0.5]]
    # per-cell noise x(1-x)/(k-1): 0, 0.25 / 0.25, 0.25 -> per seed sum / P^2: 0.0625, 0.125
    noise_var = (0.0625 + 0.125) / 2
    out = seed_noise_test(x_S_P, k=2)
    assert out["noise_sd"] == pytest.approx(math.sqrt(noise_var))
    assert out["seed_sd"] == pytest.approx(np.std([0.75, 0.5], ddof=1))
    chi2 = 1 * np.var([0.75, 0.5], ddof=1) / noise_var
    assert out["chi2"] == pytest.approx(chi2) and out["p_value"] == pytest.approx(sps.chi2.sf(chi2, 1))
    bound = seed_noise_bound_test([0.75, 0.5], k=2, n_problems=2)  # m = 0.625: m(1-m)/(kP)
    assert bound["noise_sd"] == pytest.approx(math.sqrt(0.625 * 0.375 / 4))
    with pytest.raises(ValueError, match="k >= 2"):
        seed_noise_test(x_S_P, k=1)


def test_seed_noise_test_false_alarms_at_its_level_and_flags_real_seed_effects():
    rng = np.random.default_rng(11)
    p_P = 1 / (1 + np.exp(-rng.normal(0.8, 1.5, size=200)))
    same = [seed_noise_test(rng.binomial(4, p_P, size=(5, 200)) / 4, k=4)["p_value"] for _ in range(1000)]
    assert 0.035 <= np.mean(np.array(same) < 0.05) <= 0.065  # 5% nominal; SE 0.7 points
    flagged = bound_flagged = 0
    for _ in range(200):
        x_S_P = rng.binomial(4, np.clip(p_P + rng.normal(0, 0.05, size=(5, 1)), 0, 1)) / 4
        exact, bound = seed_noise_test(x_S_P, k=4), seed_noise_bound_test(x_S_P.mean(axis=1), 4, 200)
        assert bound["noise_sd"] >= exact["noise_sd"] and bound["p_value"] >= exact["p_value"]
        flagged += exact["p_value"] < 0.05
        bound_flagged += bound["p_value"] < 0.05
    assert flagged / 200 > 0.9 and bound_flagged <= flagged  # a 5-point seed SD stands out


# ----------------------------------------------------------------------------- power


def test_minimum_detectable_effect_and_power_by_hand():
    # normal: (1.959964 + 0.841621) x se
    assert minimum_detectable_effect(0.01) == pytest.approx(2.801585 * 0.01, rel=1e-6)
    # t with 4 df: t_0.975 = 2.776445, t_0.8 = 0.940965
    assert minimum_detectable_effect(0.01, df=4) == pytest.approx((2.776445 + 0.940965) * 0.01, rel=1e-6)
    assert power_t(0.0, 0.01, math.inf) == pytest.approx(0.05)
    assert power_t(2.801585 * 0.01, 0.01, math.inf) == pytest.approx(0.8, abs=1e-3)  # lower tail ~0
    assert 0.78 < power_t(minimum_detectable_effect(0.01, df=4), 0.01, 4) < 0.82


def test_power_t_matches_a_simulated_welch_test():
    # 5 seeds per arm, seed-mean SD 0.02 in both: se = 0.02 sqrt(2/5), df ~ 8 for equal spreads
    rng = np.random.default_rng(12)
    se, diff = 0.02 * math.sqrt(2 / 5), 0.03
    a = rng.normal(diff, 0.02, size=(4000, 5))
    b = rng.normal(0.0, 0.02, size=(4000, 5))
    simulated = np.mean(welch_interval(a, b)["p_value"] < 0.05)
    assert power_t(diff, se, df=8) == pytest.approx(simulated, abs=0.03)
