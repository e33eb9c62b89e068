"""The figures of the report's bottom line, drawn from its tables:

| file stem               | needs                                                             |
|-------------------------|-------------------------------------------------------------------|
| forest_differences      | the bottom line's differences (`results.report.bottom_line.Line`) |
| interval_estimates      | >= 2 arms with >= 3 seeds: the aggregate (IQM) and scores tables  |
| probability_of_improvement | >= 3 seeds in both arms of a difference: its poi columns       |

The last two are rliable's (Agarwal et al., 2021) interval-estimate and probability-of-improvement
plots; with fewer seeds their intervals say little and they are left out.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from results.report.bands import MIN_BAND_SEEDS
from results.report.bottom_line import Line
from results.report.plotting import (
    COLUMN_IN,
    HEIGHT_IN,
    TEXT_IN,
    Figure,
    arm_style,
    new_figure,
    save,
    styled,
)


def _row_label(line: Line, several_benchmarks: bool) -> str:
    return f"{line.arm} \u2212 {line.other}" + (f" ({line.benchmark})" if several_benchmarks else "")


@styled
def forest_plot(lines: list[Line], out_dir: Path) -> list[Figure]:
    """Every difference of the bottom line: its point estimate (filled where a direction is shown,
    open where not), the bootstrap interval (thick) and the seed-level interval (thin, below), at
    95% or, for a primary claim, at its Holm level; in points of %, 0 dashed."""
    if not lines:
        return []
    several = len({line.benchmark for line in lines}) > 1
    height = max(HEIGHT_IN * 0.6, 0.55 + 0.32 * len(lines))
    fig, (ax,) = new_figure(width=TEXT_IN if len(lines) > 3 or several else COLUMN_IN, height=height)
    for y, line in enumerate(lines):
        style = arm_style(line.arm)
        ax.plot(
            [100 * v for v in line.boot],
            [y, y],
            color=style.color,
            linewidth=2.6,
            alpha=0.8,
            solid_capstyle="butt",
        )
        if line.welch is not None:
            ax.plot([100 * v for v in line.welch], [y + 0.22] * 2, color=style.color, linewidth=0.9)
        face = style.color if line.shown else "white"
        ax.plot(
            100 * line.diff, y, marker=style.marker, color=style.color, markerfacecolor=face, markersize=5
        )
        if line.primary:
            ax.annotate(
                f"{100 * line.confidence:.3g}%",
                (100 * line.boot[1], y),
                xytext=(3, -2),
                textcoords="offset points",
                fontsize=5.5,
                color="0.3",
            )
    ax.axvline(0, color="0.3", linestyle="--", linewidth=0.7)
    ax.set_yticks(range(len(lines)), [_row_label(line, several) for line in lines])
    ax.set_ylim(len(lines) - 0.4, -0.6)
    ax.grid(False, axis="y")
    ax.set_xlabel("difference (points of %)")
    primary = any(line.primary for line in lines)
    caption = (
        "Each difference of the bottom line (arm minus the other arm, problems paired, each arm's seeds "
        "independent): marker = the difference of the mean scores; thick bar = the two-level bootstrap "
        "interval; thin bar (below it) = the seed-level interval (Welch's t over per-seed means); both at 95%"
        + (", or for a primary claim at its Holm level (the % beside it)" if primary else "")
        + ". Filled marker: a direction is shown (both intervals exclude 0 on the same side"
        + (" and Holm's adjusted p < 0.05" if primary else "")
        + "); open: not."
    )
    return [
        save(
            fig,
            out_dir,
            "forest_differences",
            "Differences with their intervals",
            caption,
            None,
            section="bottom line",
        )
    ]


def _enough_seeds(table: pd.DataFrame, column: str = "n_seeds") -> pd.DataFrame:
    return table[pd.to_numeric(table.get(column), errors="coerce") >= MIN_BAND_SEEDS] if len(table) else table


@styled
def interval_estimates(
    aggregate: pd.DataFrame, scores: pd.DataFrame, arms: list[str], out_dir: Path
) -> list[Figure]:
    """rliable's interval estimates: per arm, the IQM over seeds and benchmarks (the aggregate
    table) and the mean score on each benchmark (the scores table), each with its 95% interval;
    only arms with at least `MIN_BAND_SEEDS` seeds, and only with two such arms."""
    panels = []
    agg = _enough_seeds(aggregate)
    if len(agg) >= 2:
        panels.append(("IQM (%)", agg.rename(columns={"iqm": "mean"})))
    good = _enough_seeds(scores)
    for bench, group in good.groupby("benchmark", sort=False) if len(good) else ():
        if len(group) >= 2:
            panels.append((f"mean on {bench} (%)", group))
    panels = panels[:3]
    if not panels:
        return []
    order = [a for a in arms if any(a in set(t["arm"]) for _, t in panels)]
    fig, axes = new_figure(
        width=TEXT_IN if len(panels) > 1 else COLUMN_IN,
        height=0.5 + 0.28 * len(order),
        panels=len(panels),
        sharex=False,
    )
    for ax, (label, table) in zip(axes, panels):
        rows = table.set_index("arm")
        for y, arm in enumerate(order):
            if arm not in rows.index:
                continue
            r, style = rows.loc[arm], arm_style(arm)
            ax.barh(
                y,
                100 * (r["ci_high"] - r["ci_low"]),
                left=100 * r["ci_low"],
                height=0.6,
                color=style.color,
                alpha=0.75,
            )
            ax.plot([100 * r["mean"]] * 2, [y - 0.3, y + 0.3], color="black", linewidth=1.0)
        ax.margins(x=0.08)
        ax.set_yticks(range(len(order)), order if ax is axes[0] else [""] * len(order))
        ax.set_ylim(len(order) - 0.5, -0.5)
        ax.set_xlabel(label)
        ax.grid(False, axis="y")
    caption = (
        "Interval estimates (rliable): per arm, the interquartile mean of its per-seed scores over seeds and "
        "benchmarks and its mean score on each benchmark; bar = 95% bootstrap interval (IQM: seeds resampled; "
        "mean: seeds and problems), black tick = the point estimate. Arms with at least "
        f"{MIN_BAND_SEEDS} seeds."
    )
    return [save(fig, out_dir, "interval_estimates", "Interval estimates", caption, None, section="curves")]


@styled
def probability_of_improvement(diffs: pd.DataFrame, out_dir: Path) -> list[Figure]:
    """rliable's probability of improvement of each difference (arm over the other, per benchmark)
    with its 95% interval, where both arms have at least `MIN_BAND_SEEDS` seeds."""
    if diffs.empty or "poi" not in diffs:
        return []
    good = diffs[(diffs["n_seeds"] >= MIN_BAND_SEEDS) & (diffs["n_seeds_baseline"] >= MIN_BAND_SEEDS)]
    good = good.dropna(subset=["poi"])
    if good.empty:
        return []
    several = good["benchmark"].nunique() > 1
    fig, (ax,) = new_figure(width=COLUMN_IN if len(good) <= 4 else TEXT_IN, height=0.55 + 0.3 * len(good))
    labels = []
    for y, r in enumerate(good.itertuples()):
        style = arm_style(r.arm)
        ax.barh(y, r.poi_high - r.poi_low, left=r.poi_low, height=0.6, color=style.color, alpha=0.75)
        ax.plot([r.poi] * 2, [y - 0.3, y + 0.3], color="black", linewidth=1.0)
        labels.append(f"P({r.arm} > {r.baseline})" + (f" {r.benchmark}" if several else ""))
    ax.axvline(0.5, color="0.3", linestyle="--", linewidth=0.7)
    ax.set_yticks(range(len(good)), labels)
    ax.set_ylim(len(good) - 0.5, -0.5)
    ax.set_xlim(min(0.0, float(np.nanmin(good["poi_low"]))), 1.0)
    ax.set_xlabel("probability of improvement")
    ax.grid(False, axis="y")
    caption = (
        "Probability of improvement (rliable): the chance that a run of the first arm scores above a run of "
        "the second (ties count half), with its 95% interval from resampling each arm's seeds; 0.5 (dashed) "
        f"means neither tends to win. Pairs where both arms have at least {MIN_BAND_SEEDS} seeds."
    )
    return [
        save(
            fig,
            out_dir,
            "probability_of_improvement",
            "Probability of improvement",
            caption,
            None,
            section="curves",
        )
    ]
