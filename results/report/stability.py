"""Stability: steps to collapse per run under the rule fixed in `results.collapse`, per arm a
Kaplan-Meier survival curve (a figure) and a table of runs collapsed and median steps to collapse."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from results.collapse import (
    FRACTION,
    MIN_STEP,
    WINDOW,
    TimeToCollapse,
    kaplan_meier,
    median_steps_to_collapse,
)
from results.comparison import Comparison
from results.report.plotting import Figure, arm_colors, legend_below, new_figure, save, styled

RULE = (
    f"collapsed: the first step >= {MIN_STEP} whose {WINDOW}-step trailing mean training reward is below "
    f"{FRACTION:.0%} of its best earlier one, or the last step of a run that ended non-finite "
    "(results/collapse.py, fixed before the runs); a run that never collapses counts until its last step. "
    "Deepest fall: each run's lowest trailing mean reward over its best earlier one (1 = it never fell; "
    "descriptive, added after the first stability runs had been seen, not part of the rule)"
)


DEEPEST_FALL = "deepest fall per run (descriptive)"
"""The column of each run's lowest trailing reward / best earlier one (`results.collapse.deepest_fall`):
1 = never fell, below 0.5 = collapsed. Added after the first stability runs were seen, so it
describes and decides nothing."""


def times_by_arm(comparison: Comparison) -> dict[str, list[TimeToCollapse]]:
    """Each arm's runs that trained (at least one step) as times to collapse, censored at their last step."""
    runs = comparison.runs
    out: dict[str, list[TimeToCollapse]] = {}
    if runs.empty or "collapsed" not in runs:
        return out
    for arm in comparison.arms:
        group = runs[(runs["arm"] == arm) & (pd.to_numeric(runs["steps"], errors="coerce") > 0)]
        out[arm] = [
            TimeToCollapse(int(r.collapse_step) if r.collapsed else int(r.steps), bool(r.collapsed))
            for r in group.itertuples()
        ]
    return {arm: times for arm, times in out.items() if times}


def stability_table(comparison: Comparison) -> pd.DataFrame:
    """Per arm: its runs collapsed of its runs, the median steps to collapse (Kaplan-Meier; "> N"
    when fewer than half collapsed in N steps) and each collapsed run's step."""
    rows = []
    runs = comparison.runs
    for arm, times in times_by_arm(comparison).items():
        steps = sorted(t.steps for t in times if t.collapsed)
        row = {
            "arm": arm,
            "collapsed / runs": f"{len(steps)} / {len(times)}",
            "median steps to collapse": median_steps_to_collapse(times),
            "collapse steps": ", ".join(map(str, steps)) or "-",
            "longest run (steps)": max(t.steps for t in times),
        }
        if "deepest_fall" in runs:
            falls = pd.to_numeric(runs.loc[runs["arm"] == arm, "deepest_fall"], errors="coerce").dropna()
            row[DEEPEST_FALL] = ", ".join(f"{f:.2f}" for f in sorted(falls)) or "-"
        rows.append(row)
    return pd.DataFrame(rows)


LINESTYLES = ("-", "--", ":", "-.")
"""Dash patterns of the survival curves, one per arm in turn: arms that never collapse share the
line at 1, and each stays visible under the next (drawn thinner on top)."""


@styled
def survival_figure(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """The Kaplan-Meier curve of every arm: the share of its runs not collapsed by each step, a
    step function to the arm's longest run (ticks: runs censored without collapsing)."""
    by_arm = times_by_arm(comparison)
    if not by_arm:
        return []
    fig, (ax,) = new_figure()
    colors = arm_colors(comparison.arms)
    for i, (arm, times) in enumerate(by_arm.items()):
        curve = kaplan_meier(times)
        end = max(t.steps for t in times)
        steps = [*curve["step"], end]
        survival = [*curve["survival"], curve["survival"].iloc[-1]]
        ax.step(
            steps,
            survival,
            where="post",
            color=colors[arm],
            linewidth=max(2.6 - 0.5 * i, 0.9),
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            label=f"{arm} (n = {len(times)})",
        )
        censored = [t.steps for t in times if not t.collapsed]
        at = [float(curve.loc[curve["step"] <= c, "survival"].iloc[-1]) for c in censored]
        ax.plot(censored, at, linestyle="none", marker="|", markersize=9, color=colors[arm])
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("learner step")
    ax.set_ylabel("share not collapsed")
    legend_below(fig, ax, columns=2)  # inside, it crossed the curves that fall
    caption = f"Kaplan-Meier estimate per arm of P(no collapse by step). {RULE}. Ticks: censored runs."
    return [save(fig, out_dir, "stability_survival", "Survival: runs not collapsed by step", caption, None)]
