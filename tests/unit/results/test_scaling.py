"""Compute-performance curves (`results.scaling`): ScaleRL's saturating curve recovered from
synthetic runs with known parameters, bootstrap intervals over seeds that cover them, and the
first-half fit predicting the second half."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from results.scaling import (
    asymptote_reading,
    fit_arm,
    fit_curve,
    holdout_error,
    saturating,
    saturating_jacobian,
)

TRUE = {"r0": 0.45, "a": 0.72, "b": 1.4, "c_mid": 3e14}


def _runs(n_runs: int = 5, noise: float = 0.01, seed: int = 0, **params) -> pd.DataFrame:
    """`n_runs` seeds evaluated at 12 compute points each (log-spaced 2e13 .. 4e15, with a per-seed
    jitter), scores = the true curve + Gaussian evaluation noise."""
    p = {**TRUE, **params}
    rng = np.random.default_rng(seed)
    rows = []
    for run in range(n_runs):
        flops = np.geomspace(2e13, 4e15, 12) * rng.uniform(0.9, 1.1)
        score = saturating(flops, p["r0"], p["a"], p["b"], p["c_mid"]) + rng.normal(0, noise, len(flops))
        rows += [{"run": f"s{run}", "flops": c, "score": r} for c, r in zip(flops, score)]
    return pd.DataFrame(rows)


def test_the_curve_starts_at_r0_reaches_half_the_gain_at_c_mid_and_saturates_at_a():
    assert saturating(np.array([0.0]), 0.4, 0.8, 1.0, 1e14)[0] == pytest.approx(0.4)
    assert saturating(np.array([1e14]), 0.4, 0.8, 2.0, 1e14)[0] == pytest.approx(0.6)
    assert saturating(np.array([1e20]), 0.4, 0.8, 2.0, 1e14)[0] == pytest.approx(0.8)


def test_the_fits_jacobian_is_the_curves_derivative():
    # by hand at C = C_mid (rho = 1): dR/dA = 1/2, dR/dB = 0 (ln 1), dR/dlog C_mid = -(A - R0) B / 4
    at_mid = saturating_jacobian(np.array([2.0]), 0.4, 0.8, 1.5, math.log(2.0))[0]
    assert at_mid == pytest.approx([0.5, 0.0, -0.4 * 1.5 / 4])
    # and against finite differences of `saturating` in (A, B, log C_mid), across both sides of C_mid
    from scipy.optimize._numdiff import approx_derivative

    c = np.geomspace(0.01, 100.0, 9)
    for a, b, log_mid in [(0.72, 1.4, 0.3), (0.2, 0.5, -2.0), (0.9, 7.0, 1.0)]:
        numeric = approx_derivative(
            lambda p: saturating(c, 0.45, p[0], p[1], math.exp(p[2])),
            np.array([a, b, log_mid]),
            method="3-point",
        )
        assert saturating_jacobian(c, 0.45, a, b, log_mid) == pytest.approx(numeric, abs=1e-7)


def test_known_parameters_are_recovered():
    points = _runs(noise=0.0)
    fit = fit_curve(points["flops"].to_numpy(), points["score"].to_numpy(), TRUE["r0"])
    assert fit.a == pytest.approx(TRUE["a"], abs=1e-4) and fit.b == pytest.approx(TRUE["b"], rel=1e-3)
    assert fit.c_mid == pytest.approx(TRUE["c_mid"], rel=1e-3)
    noisy = _runs(noise=0.01, seed=1)
    fit = fit_curve(noisy["flops"].to_numpy(), noisy["score"].to_numpy(), TRUE["r0"])
    assert fit.a == pytest.approx(TRUE["a"], abs=0.02) and fit.b == pytest.approx(TRUE["b"], abs=0.3)
    # a slower, lower arm
    other = _runs(noise=0.01, seed=2, a=0.6, b=0.8, c_mid=1e15)
    fit = fit_curve(other["flops"].to_numpy(), other["score"].to_numpy(), TRUE["r0"])
    assert fit.a == pytest.approx(0.6, abs=0.05) and fit.b == pytest.approx(0.8, abs=0.25)


def test_bootstrap_intervals_over_seeds_and_the_fit_predicting_its_second_half():
    out = fit_arm(_runs(noise=0.01, seed=3), TRUE["r0"], n_boot=200)
    assert out["A_low"] <= out["A"] <= out["A_high"] and out["B_low"] <= out["B"] <= out["B_high"]
    assert out["A_high"] - out["A_low"] < 0.03 and out["n_runs"] == 5 and out["n_points"] == 60
    assert out["holdout_mae"] < 0.02  # evaluation noise is 0.01
    # a curve that is not saturating (a straight line in log C, still rising) predicts poorly
    c = np.geomspace(1e13, 1e16, 30)
    linear = 0.45 + 0.1 * np.log10(c / 1e13)
    assert holdout_error(c, linear, 0.45) > 3 * out["holdout_mae"]


def test_the_seed_bootstrap_covers_the_truth_most_of_the_time_but_under_covers_at_five_seeds():
    # the percentile bootstrap over 5 seeds is too narrow (as the issue found for scores): its
    # 95% intervals of A cover the true A in 16 of 20 such data sets (results.scaling's docstring)
    covered = [
        (out := fit_arm(_runs(noise=0.01, seed=s), TRUE["r0"], n_boot=100))["A_low"]
        <= TRUE["a"]
        <= out["A_high"]
        for s in range(10)
    ]
    assert 6 <= sum(covered) <= 10


def test_too_few_points_or_one_seed():
    assert fit_curve(np.array([1e14, 2e14, 3e14]), np.array([0.5, 0.6, 0.62]), 0.45) is None
    assert fit_arm(_runs(n_runs=1, noise=0.0)[:3], 0.45) == {}
    one = fit_arm(_runs(n_runs=1, noise=0.005), TRUE["r0"])
    assert one["n_runs"] == 1 and math.isnan(one["A_low"]) and one["A"] == pytest.approx(TRUE["a"], abs=0.03)


def test_the_report_fits_each_arm_from_its_in_training_evaluations(tmp_path):
    import json

    from results.comparison import load
    from results.report.compute_curves import compute_curve_figures, compute_curve_table

    root = tmp_path / "cmp"
    (root / "status").mkdir(parents=True)
    spec = {"arms": [{"name": "sao"}, {"name": "grpo"}], "seeds": [0, 1, 2], "task": "arith"}
    (root / "comparison.json").write_text(json.dumps(spec))
    for arm, params in (("sao", {"a": 0.72, "b": 1.4}), ("grpo", {"a": 0.62, "b": 0.9})):
        points = _runs(n_runs=3, noise=0.005, seed=len(arm), **params)
        for seed in range(3):
            run = root / "runs" / f"{arm}-s{seed}"
            run.mkdir(parents=True)
            (run / "config.json").write_text(json.dumps({"algo": arm, "seed": seed}))
            (root / "status" / f"{arm}-s{seed}.json").write_text(json.dumps({"state": "finished"}))
            mine = points[points["run"] == f"s{seed}"]
            base = {"eval/arith/avg_at_k": TRUE["r0"], "eval/arith/n_operands=2/avg_at_k": 0.8}
            lines = [{"step": 0, **base}]  # the base model, before any FLOPs
            lines += [
                {"step": 10 * (i + 1), "budget/flops": c, "eval/arith/avg_at_k": r}
                | {"eval/arith/n_operands=2/avg_at_k": r}  # a breakdown: not a benchmark of its own
                for i, (c, r) in enumerate(zip(mine["flops"], mine["score"]))
            ]
            (run / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    comparison = load([root])
    table = compute_curve_table(comparison, n_boot=50).set_index("arm")
    assert list(table.index) == ["sao", "grpo"] and set(table["R0 %"]) == {"45.0"}
    a_sao, a_grpo = (float(table.loc[arm, "A % [95% CI]"].split()[0]) for arm in ("sao", "grpo"))
    assert a_sao == pytest.approx(72.0, abs=1.0) and a_grpo == pytest.approx(62.0, abs=1.5)
    assert float(table.loc["sao", "B [95% CI]"].split()[0]) == pytest.approx(1.4, abs=0.2)
    assert table.loc["sao", "points"] == 36 and table.loc["sao", "runs"] == 3
    (figure,) = compute_curve_figures(comparison, tmp_path / "figures")
    assert figure.key == "compute_curves_arith" and figure.png.is_file()


def test_how_far_each_asymptote_can_be_read():
    # the true C_mid (3e14) lies inside the measured compute (2e13 .. 4e15): A is read from the data
    assert asymptote_reading(fit_arm(_runs(noise=0.01, seed=4), TRUE["r0"], n_boot=20)) == "within the data"
    # the same curve seen only up to 1e14, a third of the way to its midpoint: A is an extrapolation
    early = _runs(noise=0.0, seed=4)
    early = early[early["flops"] < 1e14]
    fit = fit_arm(early, TRUE["r0"], n_boot=20)
    assert fit["C_mid"] > fit["C_max"]
    assert asymptote_reading(fit).startswith("extrapolated: C_mid ")
    assert asymptote_reading({**fit, "A": 1.0}) == "at its bound: not identified"
    # a run that did not move fits either B at its bound (flat) or A's interval around R0
    unmoved = {**fit, "A": TRUE["r0"] + 0.002, "A_low": TRUE["r0"] - 0.01, "A_high": TRUE["r0"] + 0.01}
    assert asymptote_reading(unmoved) == "no change from R0 shown (A's interval contains it)"
    assert asymptote_reading({**fit, "B": 1e-3}) == "flat (B at its bound): not identified"
    # and one that fell
    falling = fit_arm(_runs(noise=0.005, seed=5, a=0.1), TRUE["r0"], n_boot=20)
    assert asymptote_reading(falling) == "a fall below R0 (within the data)"
