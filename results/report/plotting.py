"""What every report figure shares: the `Figure` record, arm colours, seed bands and saving.

Figures are drawn with matplotlib's object API (`matplotlib.figure.Figure`, no pyplot), so
nothing depends on a display or a GUI backend, and a figure is freed once its function returns.

Seed aggregation, one rule for every curve: a curve is the mean over an arm's seeds, and the
band is the min-max over those seeds (with one seed, no band). Per-step metrics are matched
by step; curves against a continuous x (trajectories, seconds) are interpolated onto the
union of the seeds' x values inside the range every seed covers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

DPI = 110
BAND = "min-max over seeds"
PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#ff7f0e",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#17becf",
    "#7f7f7f",
    "#bcbd22",
)


@dataclass
class Figure:
    """One figure the report wrote: a PNG and an SVG of the same drawing."""

    key: str
    """file stem and HTML anchor, e.g. `fig3_eval_vs_trajectories_arith`"""
    title: str
    caption: str
    """what is plotted, what the band is, how many seeds"""
    png: Path
    svg: Path
    paper_ref: str | None = None
    """the paper's figure this one corresponds to, e.g. "Fig. 3" (None: beyond the paper)"""


def new_figure(width: float = 6.4, height: float = 3.8, panels: int = 1, sharex: bool = True):
    """(matplotlib figure, list of axes): `panels` axes side by side, a light grid on each."""
    fig = MplFigure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, panels, sharex=sharex, squeeze=False)[0].tolist()
    for ax in axes:
        ax.grid(True, alpha=0.3, linewidth=0.6)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, axes


def save(fig: MplFigure, out_dir: Path, key: str, title: str, caption: str, paper_ref: str | None) -> Figure:
    """Write `<key>.png` and `<key>.svg` under `out_dir` (no timestamps in the files, so the
    same data gives the same bytes) and return the record."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg = out_dir / f"{key}.png", out_dir / f"{key}.svg"
    fig.savefig(png, dpi=DPI, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None, "Creator": None})
    return Figure(key=key, title=title, caption=caption, png=png, svg=svg, paper_ref=paper_ref)


def arm_colors(arms: list[str]) -> dict[str, str]:
    """A fixed colour per arm, by the arm's position in the comparison (the same in every figure)."""
    return {arm: PALETTE[i % len(PALETTE)] for i, arm in enumerate(arms)}


def ordered_arms(preferred: list[str], present) -> list[str]:
    """The arms in `present`, in `preferred` order, then any others sorted."""
    present = set(present)
    return [a for a in dict.fromkeys(preferred) if a in present] + sorted(present - set(preferred))


def seeds_phrase(counts: dict[str, int]) -> str:
    """'n = 2 seeds per arm' or 'n = 1-3 seeds per arm (see legend)', with the band rule."""
    if not counts:
        return ""
    lo, hi = min(counts.values()), max(counts.values())
    n = f"n = {lo}" if lo == hi else f"n = {lo}-{hi}"
    band = f"shaded band: {BAND}" if hi > 1 else "one seed per arm, so no band"
    return f"Lines: mean over seeds ({n} seed{'s' if hi > 1 else ''} per arm); {band}."


def smoothing_window(n_steps: int) -> int:
    """Rolling-mean window for per-step curves: about 1/50 of the run (1 = no smoothing)."""
    return max(1, round(n_steps / 50))


def band_by_step(metrics: pd.DataFrame, column: str, window: int = 1) -> pd.DataFrame:
    """Per (arm, step): mean, min and max over seeds of `column` and the seed count `n`.
    Each run's series is first smoothed with a centred rolling mean of `window` steps."""
    d = metrics.loc[metrics[column].notna(), ["arm", "run", "step", column]].sort_values(["run", "step"])
    if d.empty:
        return pd.DataFrame(columns=["arm", "step", "mean", "min", "max", "n"])
    if window > 1:
        rolled = d.groupby("run")[column].rolling(window, center=True, min_periods=1).mean()
        d[column] = rolled.reset_index(level=0, drop=True)
    out = d.groupby(["arm", "step"])[column].agg(["mean", "min", "max", "count"])
    return out.rename(columns={"count": "n"}).reset_index()


def band_on_grid(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per arm: mean, min and max over seeds of `y` against a continuous `x` (columns arm, run,
    x, y), each run interpolated onto the union of the runs' x values inside their common range."""
    parts = []
    for arm, arm_points in points.dropna(subset=[x, y]).groupby("arm", sort=False):
        runs = [g.sort_values(x).drop_duplicates(x, keep="last") for _, g in arm_points.groupby("run")]
        lo, hi = max(r[x].min() for r in runs), min(r[x].max() for r in runs)
        grid = np.unique(np.concatenate([r[x].to_numpy() for r in runs]))
        grid = grid[(grid >= lo) & (grid <= hi)]
        if grid.size == 0:
            continue
        ys = np.vstack([np.interp(grid, r[x].to_numpy(), r[y].to_numpy()) for r in runs])
        parts.append(
            pd.DataFrame(
                {"arm": arm, x: grid, "mean": ys.mean(0), "min": ys.min(0), "max": ys.max(0), "n": len(runs)}
            )
        )
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def draw_band(
    ax, band: pd.DataFrame, x: str, color: str, label: str, linestyle: str = "-", marker: str | None = None
) -> None:
    """One arm's mean line and its min-max band (no band where only one seed has data)."""
    ax.plot(
        band[x],
        band["mean"],
        color=color,
        linestyle=linestyle,
        linewidth=1.6,
        label=label,
        marker=marker,
        markersize=3.5,
    )
    if (band["n"] > 1).any():
        ax.fill_between(band[x], band["min"], band["max"], color=color, alpha=0.18, linewidth=0)


def runs_per_arm(metrics: pd.DataFrame, column: str) -> dict[str, int]:
    """How many runs of each arm have any value of `column`."""
    if column not in metrics:
        return {}
    d = metrics.loc[metrics[column].notna(), ["arm", "run"]].drop_duplicates()
    return d.groupby("arm")["run"].nunique().to_dict()


def has_data(metrics: pd.DataFrame, column: str) -> bool:
    """Whether `metrics` has the column with at least one finite value."""
    return column in metrics and bool(np.isfinite(pd.to_numeric(metrics[column], errors="coerce")).any())


def legend(ax, **kwargs) -> None:
    """A small legend (only when something is labelled)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=8, frameon=False, **kwargs)


def use_log_scale(values: pd.Series) -> bool:
    """Log y for positive data spanning more than two decades (e.g. grad norms)."""
    v = values.dropna()
    return len(v) > 0 and bool((v > 0).all()) and math.log10(v.max() / v.min()) > 2
