"""Learning curves: training reward and held-out score against what the runs spent, each
against trajectories trained, against compute (model FLOPs, `budget/flops`, where the runs
counted them) and against wall time; one column-wide figure per (quantity, x).

| file stem                                 | paper  | y                                   |
|-------------------------------------------|--------|-------------------------------------|
| reward_vs_{trajectories,flops,time}       | -      | reward/mean (each run smoothed)     |
| fig3_eval_vs_{trajectories,flops,time}_B  | Fig. 3 | eval/B/avg_at_k (step 0: before training) |

Every curve follows `results.report.bands`: a thin line per seed, the mean, and the 95%
bootstrap band of the mean over seeds. Fractions (scores, 0/1 rewards) are drawn in %. Every
arm is drawn, a flat one too: an arm whose held-out score never moved is a result to compare, not
an empty series (the training diagnostics, `figures_training`, name constant series instead).
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from results.comparison import Comparison
from results.report.bands import band_on_grid, draw_arm, seeds_phrase, smoothing_window
from results.report.plotting import (
    Figure,
    arm_style,
    has_data,
    is_fraction,
    legend_below,
    new_figure,
    ordered_arms,
    save,
    styled,
)

EVAL_KEY = re.compile(r"^eval/([^/]+)/avg_at_k$")
X_AXES = (
    ("budget/trajectories", "trajectories", "trajectories trained"),
    ("budget/flops", "flops", "model FLOPs (generation, learner, critic)"),
    ("budget/elapsed_s", "time", "training wall time"),
)
"""(the cumulative count, the file stem's word, the axis label) of each x a curve is drawn against"""


def _x_columns(metrics: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The x axes the runs recorded (FLOPs only where counted: positive somewhere)."""
    out = []
    for column, name, label in X_AXES:
        if has_data(metrics, column) and (pd.to_numeric(metrics[column], errors="coerce") > 0).any():
            out.append((column, name, label))
    return out


def _time_unit(seconds: float) -> tuple[float, str]:
    """(divisor, unit) that keeps a wall-time axis readable."""
    if seconds > 3 * 3600:
        return 3600.0, "h"
    if seconds > 180:
        return 60.0, "min"
    return 1.0, "s"


def _points(comparison: Comparison, column: str, window: int) -> pd.DataFrame:
    """(arm, run, every x column, y) of the rows where `column` has a value, the x counts carried
    forward within a run (a step-0 evaluation is at 0), each run's y smoothed over `window` steps."""
    m = comparison.metrics.sort_values(["run", "step"])
    xs = [c for c, _, _ in X_AXES if c in m]
    filled = m.groupby("run")[xs].ffill().fillna(0.0) if xs else m[[]]
    points = pd.concat([m[["arm", "run", "step", column]], filled], axis=1)
    points = points[points[column].notna()].rename(columns={column: "y"})
    points["y"] = pd.to_numeric(points["y"], errors="coerce").astype(float)
    if window > 1:
        rolled = points.groupby("run")["y"].rolling(window, center=True, min_periods=1).mean()
        points["y"] = rolled.reset_index(level=0, drop=True)
    return points


@styled
def learning_curves(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Training reward and every in-training evaluation against each recorded x (module docstring)."""
    m = comparison.metrics
    if m.empty or "step" not in m:
        return []
    xs = _x_columns(m)
    figures = []
    if has_data(m, "reward/mean"):
        train = m[m["step"] > 0]
        window = smoothing_window(int(train["step"].max())) if len(train) else 1
        points = _points(comparison, "reward/mean", window)
        points = points[points["step"] > 0]
        for x, name, label in xs:
            figures += _curve(comparison, out_dir, points, x, label, _reward_text(name, label, window))
    benches = [b.group(1) for b in map(EVAL_KEY.match, m.columns) if b and has_data(m, b.group(0))]
    for bench in benches:
        points = _points(comparison, f"eval/{bench}/avg_at_k", 1)
        for x, name, label in xs:
            figures += _curve(
                comparison, out_dir, points, x, label, _eval_text(comparison, bench, name, label)
            )
    return figures


def _reward_text(name: str, label: str, window: int) -> dict:
    smoothing = f" Each run smoothed with a centred {window}-step rolling mean." if window > 1 else ""
    return {
        "key": f"reward_vs_{name}",
        "title": f"Training reward vs {label.split(' (')[0]}",
        "ylabel": "training reward",
        "caption": f"Mean training reward of each step's batch (reward/mean) against {label}.{smoothing}",
        "paper_ref": None,
    }


def _eval_text(comparison: Comparison, bench: str, name: str, label: str) -> dict:
    k = _eval_k(comparison)
    return {
        "key": f"fig3_eval_vs_{name}_{bench}",
        "title": f"{bench}: held-out score vs {label.split(' (')[0]}",
        "ylabel": f"{bench} avg@{k}",
        "caption": f"In-training evaluation on {bench}: avg@{k} (correctness averaged over {k} samples per "
        f"problem) against {label} (0: the evaluation before the first step). Seeds are interpolated onto "
        "a common x grid where they all have data.",
        "paper_ref": "Fig. 3",
    }


def _curve(comparison: Comparison, out_dir: Path, points: pd.DataFrame, x: str, xlabel: str, text: dict):
    """One quantity against one x: every arm's seeds, mean and band (`results.report.bands`)."""
    band = band_on_grid(points[["arm", "run", x, "y"]], x, "y")
    if band.empty:
        return []
    percent = is_fraction(points["y"])
    scale = 100.0 if percent else 1.0
    divisor, unit = _time_unit(float(points[x].max())) if x == "budget/elapsed_s" else (1.0, "")
    fig, (ax,) = new_figure()
    counts = band.groupby("arm")["n"].max().to_dict()
    for arm in ordered_arms(comparison.arms, counts):
        mine = band[band["arm"] == arm].assign(**{x: lambda f: f[x] / divisor})
        seeds = points.loc[points["arm"] == arm, ["run", x, "y"]].assign(**{x: lambda f: f[x] / divisor})
        draw_arm(ax, mine, x, arm_style(arm), f"{arm} (n={counts[arm]})", seeds, scale)
    ax.set_xlabel(xlabel + (f" ({unit})" if unit else ""))
    ax.set_ylabel(text["ylabel"] + (" (%)" if percent else ""))
    if x == "budget/flops":
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    legend_below(fig, ax)
    caption = f"{text['caption']} {seeds_phrase(counts)}"
    return [save(fig, out_dir, text["key"], text["title"], caption, text["paper_ref"], section="curves")]


def _eval_k(comparison: Comparison) -> str:
    """The comparison's evaluation k, or 'k' when unknown or not one value."""
    ks = {spec.get("eval", {}).get("k") for spec in comparison.specs}
    return str(ks.pop()) if len(ks) == 1 and None not in ks else "k"
