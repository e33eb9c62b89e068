"""Compute-performance curves in the report: each arm's in-training evaluation scores against its
cumulative model FLOPs, fitted to ScaleRL's saturating curve (`results.scaling`): a table of A and
B per arm and benchmark with bootstrap intervals over seeds and the held-out check, and a figure
per benchmark of the points and fitted curves."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from results.comparison import Comparison
from results.report.plotting import Figure, arm_colors, legend_below, new_figure, save, styled
from results.scaling import asymptote_reading, fit_arm, fit_curve

FLOPS = "budget/flops"
CAPTION = (
    "R(C) = R0 + (A - R0) / (1 + (C_mid / C)^B) (ScaleRL, Khatri et al. 2025) fitted to each arm's "
    "in-training evaluations at their cumulative model FLOPs, seeds pooled; R0: the base model's score "
    "(the step-0 evaluations); A: asymptote, B: efficiency, C_mid: FLOPs at half the gain; 95% intervals: "
    "bootstrap over seeds (too narrow with few seeds); holdout: mean absolute error (points of %) of a fit "
    "to the first half of the compute predicting the second; A read: within the data where C_mid is at or "
    "below the largest compute measured, else an extrapolation; not identified at a bound of A or B (flat); "
    "no change shown where A's interval contains R0; a fall where A is below R0"
)


def curve_points(comparison: Comparison) -> dict[str, tuple[float, pd.DataFrame]]:
    """benchmark -> (R0, points with columns arm, run, flops, score) of every in-training
    evaluation at a counted compute; only benchmarks with a step-0 evaluation (R0)."""
    metrics = comparison.metrics
    if metrics.empty or FLOPS not in metrics or "step" not in metrics:
        return {}
    out = {}
    # eval/<bench>/avg_at_k, not a breakdown's (eval/<bench>/<key>=<value>/avg_at_k)
    for column in sorted(
        c for c in metrics if c.startswith("eval/") and c.endswith("/avg_at_k") and c.count("/") == 2
    ):
        bench = column.removeprefix("eval/").removesuffix("/avg_at_k")
        base = pd.to_numeric(metrics.loc[metrics["step"] == 0, column], errors="coerce").dropna()
        rows = metrics[(metrics["step"] > 0) & metrics[column].notna() & (metrics[FLOPS] > 0)]
        if base.empty or rows.empty:
            continue
        points = rows[["arm", "run", FLOPS, column]].rename(columns={FLOPS: "flops", column: "score"})
        out[bench] = (float(base.mean()), points.reset_index(drop=True))
    return out


def compute_curve_table(comparison: Comparison, n_boot: int = 1000) -> pd.DataFrame:
    """One row per (benchmark, arm) that can be fitted: R0, A and B with their 95% intervals, C_mid,
    the held-out error, runs and points (scores in %)."""
    rows = []
    for bench, (r0, points) in curve_points(comparison).items():
        for arm in comparison.arms:
            fit = fit_arm(points[points["arm"] == arm], r0, n_boot=n_boot)
            if not fit:
                continue
            rows.append(
                {
                    "benchmark": bench,
                    "arm": arm,
                    "R0 %": f"{100 * r0:.1f}",
                    "A % [95% CI]": f"{100 * fit['A']:.1f} [{100 * fit['A_low']:.1f}, {100 * fit['A_high']:.1f}]",
                    "B [95% CI]": f"{fit['B']:.2f} [{fit['B_low']:.2f}, {fit['B_high']:.2f}]",
                    "C_mid FLOPs": f"{fit['C_mid']:.3g}",
                    "A read": asymptote_reading(fit),
                    "holdout MAE (points)": f"{100 * fit['holdout_mae']:.1f}",
                    "runs": fit["n_runs"],
                    "points": fit["n_points"],
                }
            )
    return pd.DataFrame(rows)


@styled
def compute_curve_figures(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Per benchmark: every evaluation's score against its compute (log scale) and each arm's fitted curve."""
    figures = []
    colors = arm_colors(comparison.arms)
    for bench, (r0, points) in curve_points(comparison).items():
        fig, (ax,) = new_figure()
        drawn = False
        for arm in comparison.arms:
            mine = points[points["arm"] == arm]
            if mine.empty:
                continue
            ax.scatter(mine["flops"], 100 * mine["score"], s=10, alpha=0.5, color=colors[arm])
            fit = fit_curve(mine["flops"].to_numpy(), mine["score"].to_numpy(), r0)
            if fit is not None:
                grid = np.geomspace(mine["flops"].min() / 2, mine["flops"].max() * 4, 200)
                label = f"{arm}: A {100 * fit.a:.1f}%, B {fit.b:.2f}"
                ax.plot(grid, 100 * fit.predict(grid), color=colors[arm], linewidth=1.6, label=label)
                drawn = True
        if not drawn:
            continue
        ax.axhline(100 * r0, color="grey", linewidth=0.8, linestyle=":", label=f"base (R0) {100 * r0:.1f}%")
        ax.set_xscale("log")
        ax.set_xlabel("model FLOPs (generation, learner, critic)")
        ax.set_ylabel(f"{bench} avg@k (%)")
        legend_below(fig, ax, columns=2)  # inside, it hid the points of a falling arm
        title = f"Compute-performance curves ({bench})"
        figures.append(save(fig, out_dir, f"compute_curves_{bench}", title, CAPTION, None))
    return figures
