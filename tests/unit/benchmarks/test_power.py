"""`benchmarks.power`: standard errors and the minimum detectable effect by hand, variance
components recovered from simulated pilots, and planned seed counts that reach their power in
simulated comparisons."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.power import (
    Design,
    Variances,
    estimate_variances,
    mde,
    population_se,
    rule_power,
    seeds_needed,
    welch_se_df,
)
from benchmarks.seed_stats import minimum_detectable_effect, welch_interval

VAR = Variances(seed_a=0.0004, seed_b=0.0001, seed_problem=0.01, sample=0.2, problem=0.02)


def test_standard_errors_and_mde_by_hand():
    design = Design(seeds=3, problems=200, samples=2)
    # V_a = 0.0004 + (0.01 + 0.2 / 2) / 200 = 0.00095, V_b = 0.00065
    va, vb = 0.00095 / 3, 0.00065 / 3
    se, df = welch_se_df(VAR, design)
    assert se == pytest.approx(math.sqrt(va + vb)) and df == pytest.approx(
        (va + vb) ** 2 / ((va**2 + vb**2) / 2)
    )
    assert population_se(VAR, design) == pytest.approx(math.sqrt(va + vb + 0.02 / 200))
    expected = max(minimum_detectable_effect(se, df), 2.801585 * math.sqrt(va + vb + 0.0001))
    assert mde(VAR, design) == pytest.approx(expected, rel=1e-6)
    # more of anything shrinks it; seeds shrink only the seed side, problems both
    assert mde(VAR, Design(10, 200, 2)) < mde(VAR, design) and mde(VAR, Design(3, 1000, 2)) < mde(VAR, design)


def test_seeds_needed_is_the_first_count_that_reaches_the_power():
    seeds = seeds_needed(0.03, VAR, problems=1000, samples=2)
    assert seeds is not None and seeds >= 2
    assert rule_power(0.03, VAR, Design(seeds, 1000, 2)) >= 0.8
    assert seeds == 2 or rule_power(0.03, VAR, Design(seeds - 1, 1000, 2)) < 0.8
    # the problem side alone caps the power: 200 problems cannot show 1 point with any seeds
    assert seeds_needed(0.01, VAR, problems=200, samples=2) is None


def simulate_cells(
    rng, var: Variances, design: Design, diff: float, n_sims: int
) -> tuple[np.ndarray, np.ndarray]:
    """Cells (n_sims, seeds, problems) of two arms under the additive model of `benchmarks.power`
    with binomial samples; fixed problems per simulation, a true difference `diff`."""
    s, p, k = design.seeds, design.problems, design.samples
    base_N_P = rng.uniform(0.35, 0.65, size=(n_sims, 1, p))
    arm_N_P = rng.normal(0, math.sqrt(var.problem) / 2, size=(n_sims, 1, p))  # A - B: variance `problem`
    out = []
    for sign, tau2 in ((1, var.seed_a), (-1, var.seed_b)):
        prob = (
            base_N_P
            + sign * (diff / 2 + arm_N_P)
            + rng.normal(0, math.sqrt(tau2), size=(n_sims, s, 1))
            + rng.normal(0, math.sqrt(var.seed_problem), size=(n_sims, s, p))
        )
        out.append(rng.binomial(k, np.clip(prob, 0, 1)) / k)
    return out[0], out[1]


def test_variances_are_recovered_from_simulated_pilots():
    truth = Variances(seed_a=0.0009, seed_b=0.0001, seed_problem=0.004, sample=0.0, problem=0.006)
    rng = np.random.default_rng(13)
    a, b = simulate_cells(rng, truth, Design(5, 300, 4), 0.02, 300)
    estimates = [estimate_variances(a[i], b[i], k=4) for i in range(300)]
    mean = {
        f: np.mean([getattr(e, f) for e in estimates])
        for f in ("seed_a", "seed_b", "seed_problem", "problem")
    }
    assert mean["seed_a"] == pytest.approx(0.0009, rel=0.15) and mean["seed_b"] == pytest.approx(
        0.0001, abs=0.0001
    )
    assert mean["seed_problem"] == pytest.approx(0.004, rel=0.1) and mean["problem"] == pytest.approx(
        0.006, rel=0.1
    )
    # p(1-p) of one sample: the cells' probabilities sit near 0.5, so about 0.24
    assert np.mean([e.sample for e in estimates]) == pytest.approx(0.24, abs=0.01)
    with pytest.raises(ValueError, match="k >= 2"):
        estimate_variances(a[0], b[0], k=1)


def test_a_planned_seed_count_reaches_its_power_in_simulated_comparisons():
    # seeds dominate here (tau = 3 points in arm A), so the Welch side sets the plan
    var = Variances(seed_a=0.0009, seed_b=0.0004, seed_problem=0.004, sample=0.24, problem=0.002)
    seeds = seeds_needed(0.03, var, problems=300, samples=4)
    design = Design(seeds, 300, 4)
    se, df = welch_se_df(var, design)
    a, b = simulate_cells(np.random.default_rng(14), var, design, 0.03, 1000)
    rejected = welch_interval(a.mean(axis=2), b.mean(axis=2))["p_value"] < 0.05
    planned = rule_power(0.03, var, design)
    assert planned >= 0.8 and rule_power(0.03, var, Design(seeds - 1, 300, 4)) < 0.8
    assert np.mean(rejected) == pytest.approx(planned, abs=0.03)  # the simulated Welch test's power
    # by hand: V_a = 0.0009 + (0.004 + 0.24 / 4) / 300, V_b = 0.0004 + the same
    cell = (0.004 + 0.06) / 300
    assert se == pytest.approx(math.sqrt((0.0009 + cell + 0.0004 + cell) / seeds))
