"""Compute-performance curves: each arm's held-out score against its training compute, fitted to
ScaleRL's saturating curve (Khatri et al., "The Art of Scaling Reinforcement Learning Compute for
LLMs", 2025):

    R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B)

R0 is the base model's score (C = 0: the step-0 evaluation of the runs), A the asymptote, B the
efficiency (how steeply the score rises in log compute), C_mid the compute at which half of the
gain A - R0 is reached. Points are the runs' in-training evaluations (`--eval-every`) at their
cumulative model FLOPs (`budget/flops`), every seed's points pooled in one least-squares fit
(`scipy.optimize.curve_fit`, log C_mid as the free parameter so it is fitted on its natural scale;
A within [0, 1], B within (0, 10]).

- Intervals: a bootstrap over seeds (resample the arm's runs with replacement, refit; the 2.5 and
  97.5 percentiles of A and B). A resample whose fit fails is dropped and counted. With few seeds
  it is too narrow, as the scores' bootstrap is: on synthetic runs of 5 seeds x 12 evaluations
  (noise 0.01) its 95% interval of A covered the true A in 16 of 20 data sets
  (tests/unit/results/test_scaling.py); read A's and B's intervals as lower bounds of the spread.
- Check of the fit: fit on the points of the first half of the compute (C <= C_max / 2) and
  predict the second half; the mean absolute error of those predictions, in score units.
- Whether A was measured (`asymptote_reading`): a curve whose C_mid lies past the largest compute
  measured has not bent yet within the data, so its A is an extrapolation (many asymptotes fit
  such points about equally well); an A at its bound (100%), or a flat curve (B at its bound: the
  score did not move with compute), is not identified at all; an A whose interval contains R0 shows
  no change; an A below R0 is a fall.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

MIN_POINTS = 4
"""Distinct compute values (C > 0) a fit needs: three parameters and one more to check them."""
A_BOUND = 1.0
"""A's upper bound in the fit (a score is a fraction)."""
B_BOUND = 1e-3
"""B's lower bound in the fit: a curve with B near it is flat, R = (R0 + A) / 2 at every C."""


def saturating(c: np.ndarray, r0: float, a: float, b: float, c_mid: float) -> np.ndarray:
    """ScaleRL's R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (module docstring); R(0) = R0."""
    c = np.asarray(c, dtype=float)
    with np.errstate(divide="ignore", over="ignore"):
        ratio = np.where(c > 0, (c_mid / np.where(c > 0, c, 1.0)) ** b, np.inf)
    return r0 + (a - r0) / (1.0 + ratio)


def saturating_jacobian(c: np.ndarray, r0: float, a: float, b: float, log_mid: float) -> np.ndarray:
    """The derivatives of R(C) (`saturating`, C > 0) in the fitted parameters A, B and log C_mid,
    one row per point: with rho = (C_mid / C)^B, dR/dA = 1 / (1 + rho),
    dR/dB = -(A - R0) rho ln(C_mid / C) / (1 + rho)^2 and dR/dlog C_mid = -(A - R0) rho B / (1 + rho)^2.
    Given to the fit, it halves each iteration's cost against finite differences."""
    log_ratio = log_mid - np.log(np.asarray(c, dtype=float))
    rho = np.exp(np.minimum(b * log_ratio, 700.0))  # capped: exp overflows past ~709
    share = 1.0 / (1.0 + rho)
    slope = -(a - r0) * rho * share * share
    return np.stack([share, slope * log_ratio, slope * b], axis=1)


@dataclass(frozen=True)
class CurveFit:
    """A fitted curve's parameters (R0 given, not fitted)."""

    r0: float
    a: float
    b: float
    c_mid: float

    def predict(self, c: np.ndarray) -> np.ndarray:
        """R(C) at compute `c`."""
        return saturating(c, self.r0, self.a, self.b, self.c_mid)


def fit_curve(c: np.ndarray, r: np.ndarray, r0: float) -> CurveFit | None:
    """The least-squares fit of A, B and C_mid to points (c, r) with R0 fixed; None with fewer than
    MIN_POINTS distinct positive compute values or when the optimiser does not converge."""
    from scipy.optimize import curve_fit

    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    keep = (c > 0) & np.isfinite(r)
    c, r = c[keep], r[keep]
    if len(np.unique(c)) < MIN_POINTS:
        return None
    scale = float(np.median(c))  # fit in units of the median compute: log C_mid near 0

    def model(x, a, b, log_mid):
        return saturating(x, r0, a, b, math.exp(log_mid))

    guess = (float(np.clip(r[c >= np.quantile(c, 0.75)].mean(), 0.0, 1.0)), 1.0, 0.0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (a, b, log_mid), _ = curve_fit(
                model,
                c / scale,
                r,
                p0=guess,
                jac=lambda x, a, b, log_mid: saturating_jacobian(x, r0, a, b, log_mid),
                bounds=([0.0, B_BOUND, -20.0], [A_BOUND, 10.0, 20.0]),
                maxfev=20000,
            )
    except (RuntimeError, ValueError):
        return None
    return CurveFit(r0, float(a), float(b), float(math.exp(log_mid) * scale))


def holdout_error(c: np.ndarray, r: np.ndarray, r0: float) -> float:
    """Mean absolute error predicting the points of the second half of the compute (C > C_max / 2)
    from a fit to the first half; NaN where the first half cannot be fitted."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    first = c <= c.max() / 2
    fit = fit_curve(c[first], r[first], r0)
    if fit is None or first.all():
        return math.nan
    return float(np.mean(np.abs(fit.predict(c[~first]) - r[~first])))


def fit_arm(points: pd.DataFrame, r0: float, n_boot: int = 1000, seed: int = 0) -> dict:
    """One arm's curve: points with columns run, flops, score; the fit on all points, bootstrap
    95% intervals of A and B over runs, the held-out check, and the counts. Empty dict where the
    points cannot be fitted."""
    fit = fit_curve(points["flops"].to_numpy(), points["score"].to_numpy(), r0)
    if fit is None:
        return {}
    # each run's points as arrays, in sorted run order: a resample concatenates whole runs
    by_run = [(g["flops"].to_numpy(float), g["score"].to_numpy(float)) for _, g in points.groupby("run")]
    n_runs = len(by_run)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot if n_runs > 1 else 0):
        sample = [by_run[i] for i in rng.integers(0, n_runs, n_runs)]
        refit = fit_curve(np.concatenate([c for c, _ in sample]), np.concatenate([r for _, r in sample]), r0)
        if refit is not None:
            draws.append((refit.a, refit.b))
    a_low, a_high = _interval([a for a, _ in draws])
    b_low, b_high = _interval([b for _, b in draws])
    return {
        "r0": r0,
        "A": fit.a,
        "A_low": a_low,
        "A_high": a_high,
        "B": fit.b,
        "B_low": b_low,
        "B_high": b_high,
        "C_mid": fit.c_mid,
        "holdout_mae": holdout_error(points["flops"].to_numpy(), points["score"].to_numpy(), r0),
        "C_max": float(points["flops"].max()),
        "n_runs": n_runs,
        "n_points": len(points),
        "boot_failed": (n_boot if n_runs > 1 else 0) - len(draws),
    }


def asymptote_reading(fit: dict) -> str:
    """How far a fit's A (`fit_arm`) can be read: 'flat' (B at its bound: the score did not rise
    or fall with compute, A and C_mid not identified), 'at its bound' (A = 100%: not identified),
    'no change from R0 shown' (A's bootstrap interval contains R0), 'a fall' (A below R0: the
    score fell with compute), 'extrapolated' (C_mid beyond the largest compute measured, by how
    much: the curve has not bent within the data) or 'within the data'."""
    if fit["B"] <= 10 * B_BOUND:
        return "flat (B at its bound): not identified"
    if fit["A"] >= A_BOUND - 1e-6:
        return "at its bound: not identified"
    if fit["A_low"] <= fit["r0"] <= fit["A_high"]:  # False where the intervals are NaN (one run)
        return "no change from R0 shown (A's interval contains it)"
    beyond = fit["C_mid"] > fit["C_max"]
    where = f"C_mid {fit['C_mid'] / fit['C_max']:.1f}x the largest compute" if beyond else "within the data"
    if fit["A"] < fit["r0"]:
        return f"a fall below R0 ({where})"
    return f"extrapolated: {where}" if beyond else where


def _interval(draws: list[float]) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of bootstrap draws (NaN without any)."""
    if not draws:
        return math.nan, math.nan
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))
