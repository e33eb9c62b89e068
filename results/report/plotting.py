"""What every report figure shares: the `Figure` record, one style per arm name, paper sizes, and
saving as PNG (print resolution), SVG and PDF (fonts embedded as TrueType, Type 42).

Figures are drawn with matplotlib's object API (`matplotlib.figure.Figure`, no pyplot), so
nothing depends on a display or a GUI backend, and a figure is freed once its function returns.
A figure function is wrapped in `styled` (the paper style: small fonts sized for a column) and
draws no title: a figure goes into a paper with a caption, and the HTML page shows its title
and caption beside it.

Arm styles: an arm's colour and marker are a function of its name alone (`arm_style`), so the
same arm has the same colour in every figure of every report. The built-in arms have fixed
entries (Okabe-Ito's colour-blind-safe palette, then Paul Tol's muted one), chosen so that the
contrasts the paper draws (sao / grpo / grpo+dis / sao:dis-only) are never red against green;
any other name takes a colour and a marker from a hash of the name (two names may share a
colour, rarely also the marker).

Sizes: `COLUMN_IN` (one column of a two-column paper) and `TEXT_IN` (the text width); each
figure function picks the one its content needs.
"""

from __future__ import annotations

import functools
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure as MplFigure

COLUMN_IN = 3.25
"""width of a figure set in one column of a two-column paper (inches)"""
TEXT_IN = 6.75
"""width of a figure set across the text (inches)"""
HEIGHT_IN = 2.3
"""height of a one-row figure (inches)"""
DPI = 300
"""resolution of the PNGs (print)"""
STYLE = {
    "font.size": 7.5,
    "axes.labelsize": 7.5,
    "axes.titlesize": 8,
    "xtick.labelsize": 6.5,
    "ytick.labelsize": 6.5,
    "legend.fontsize": 6.5,
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "axes.linewidth": 0.6,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "path",
    "svg.hashsalt": "rl-bench",  # else the SVG's clip-path ids are random: a new file for the same figure
}
"""the paper style every figure is drawn and saved in (`styled`); fonts embedded as TrueType"""


class ArmStyle(NamedTuple):
    """How one arm is drawn in every figure."""

    color: str
    marker: str


FIXED_STYLES: dict[str, ArmStyle] = {
    "sao": ArmStyle("#0072B2", "o"),  # Okabe-Ito blue
    "grpo": ArmStyle("#E69F00", "s"),  # orange
    "grpo+dis": ArmStyle("#CC79A7", "D"),  # reddish purple: against grpo's orange, not red vs green
    "dapo": ArmStyle("#009E73", "^"),  # bluish green
    "ppo": ArmStyle("#D55E00", "v"),  # vermillion
    "sao:dis-only": ArmStyle("#56B4E9", "P"),  # sky blue
    "running-mean": ArmStyle("#000000", "X"),  # black
    "ppo:vapo": ArmStyle("#882255", "<"),  # Tol muted: wine
    "sao:single-critic-update": ArmStyle("#44AA99", ">"),  # teal
    "sao:full-parameter-critic": ArmStyle("#999933", "h"),  # olive
    "sao:step-average": ArmStyle("#332288", "p"),  # indigo
    "sao:step-last": ArmStyle("#AA4499", "*"),  # purple
}
"""The built-in arms' styles (module docstring)."""

HASHED_COLORS = (
    "#0072B2",
    "#E69F00",
    "#009E73",
    "#D55E00",
    "#CC79A7",
    "#56B4E9",
    "#332288",
    "#117733",
    "#882255",
    "#44AA99",
    "#999933",
    "#AA4499",
)
"""colour-blind-safe colours (Okabe-Ito, Tol muted) an arm outside `FIXED_STYLES` hashes to"""
MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<", ">", "h", "*", "p")


@dataclass
class Figure:
    """One figure the report wrote: a PNG, an SVG and a PDF of the same drawing."""

    key: str
    """file stem and HTML anchor, e.g. `fig3_eval_vs_trajectories_arith`"""
    title: str
    """shown above the caption in the HTML (never drawn inside the figure)"""
    caption: str
    """what is plotted, what the band is, how many seeds, what was left out"""
    png: Path
    svg: Path
    paper_ref: str | None = None
    """the paper's figure this one corresponds to, e.g. "Fig. 3" (None: beyond the paper)"""
    pdf: Path | None = None
    """the PDF (None for figures copied from elsewhere without one)"""
    section: str = "more"
    """where the HTML page shows it: "bottom line", "curves", "search" or "more" (`results.report.html`)"""


def arm_style(name: str) -> ArmStyle:
    """The colour and marker of the arm called `name` (module docstring): fixed for the built-in
    arms, else from a hash of the name (the same in every process and report)."""
    if name in FIXED_STYLES:
        return FIXED_STYLES[name]
    digest = zlib.crc32(name.encode())
    return ArmStyle(HASHED_COLORS[digest % len(HASHED_COLORS)], MARKERS[(digest // 97) % len(MARKERS)])


def arm_colors(arms: list[str]) -> dict[str, str]:
    """arm -> its colour (`arm_style`), for every arm of `arms`."""
    return {arm: arm_style(arm).color for arm in arms}


def styled(make):
    """Draw a figure function's figures in the paper `STYLE` (rcParams are read as artists are made)."""

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(STYLE):
            return make(*args, **kwargs)

    return wrapper


def new_figure(
    width: float = COLUMN_IN, height: float = HEIGHT_IN, panels: int = 1, sharex: bool = True
) -> tuple[MplFigure, list]:
    """(matplotlib figure, list of axes): `panels` axes side by side, a light grid on each."""
    fig = MplFigure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, panels, sharex=sharex, squeeze=False)[0].tolist()
    for ax in axes:
        ax.grid(True, alpha=0.3, linewidth=0.5)
        ax.spines[["top", "right"]].set_visible(False)
    return fig, axes


def save(
    fig: MplFigure,
    out_dir: Path,
    key: str,
    title: str,
    caption: str,
    paper_ref: str | None,
    section: str = "more",
) -> Figure:
    """Write `<key>.png` (at `DPI`), `<key>.svg` and `<key>.pdf` (TrueType fonts embedded) under
    `out_dir`, with no timestamps in the files (the same data gives the same bytes), and return
    the record."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    png, svg, pdf = (out_dir / f"{key}.{ext}" for ext in ("png", "svg", "pdf"))
    with matplotlib.rc_context(STYLE):
        fig.savefig(png, dpi=DPI, metadata={"Software": None})
        fig.savefig(svg, metadata={"Date": None, "Creator": None})
        fig.savefig(pdf, metadata={"CreationDate": None, "Creator": None, "Producer": None})
    return Figure(key, title, caption, png, svg, paper_ref, pdf, section)


def ordered_arms(preferred: list[str], present) -> list[str]:
    """The arms in `present`, in `preferred` order, then any others sorted."""
    present = set(present)
    return [a for a in dict.fromkeys(preferred) if a in present] + sorted(present - set(preferred))


def legend(ax, **kwargs) -> None:
    """A small legend (only when something is labelled)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(frameon=False, **kwargs)


def legend_below(fig: MplFigure, ax, columns: int = 3, extra: tuple = ()) -> None:
    """The figure's legend in rows below its axes (a column-wide figure has no room beside them);
    the figure grows by the legend's rows. `ax` None: every axes' entries, those repeated across
    panels once; `extra`: more handles (artists with a label)."""
    handles, labels = [*extra], [h.get_label() for h in extra]
    for axes in fig.axes if ax is None else [ax]:
        for h, label in zip(*axes.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    if not handles:
        return
    columns = _fitting_columns(fig, handles, labels, min(columns, len(labels)))
    rows = math.ceil(len(labels) / columns)
    width, height = fig.get_size_inches()
    fig.set_size_inches(width, height + 0.14 * rows + 0.05)
    fig.legend(handles, labels, loc="outside lower center", ncols=columns, frameon=False)


def _fitting_columns(fig: MplFigure, handles: list, labels: list[str], columns: int) -> int:
    """The most legend columns, up to `columns`, whose row is no wider than the figure (long arm
    names in a column-wide figure would be cut at both edges), measured by drawing the legend."""
    while columns > 1:
        probe = fig.legend(handles, labels, ncols=columns, frameon=False)
        width = probe.get_window_extent().width  # the figure's own renderer
        probe.remove()
        if width <= fig.bbox.width:
            break
        columns -= 1
    return columns


def has_data(metrics: pd.DataFrame, column: str) -> bool:
    """Whether `metrics` has the column with at least one finite value."""
    return column in metrics and bool(np.isfinite(pd.to_numeric(metrics[column], errors="coerce")).any())


def is_constant(values) -> bool:
    """Whether the finite values of a series are all one value (e.g. a clip fraction that is 0 at
    every step): such a series says nothing as a curve and is named in the caption instead."""
    v = pd.to_numeric(pd.Series(values), errors="coerce")
    v = v[np.isfinite(v)]
    return len(v) > 0 and bool(np.isclose(v.min(), v.max(), rtol=0, atol=1e-12))


def use_log_scale(values: pd.Series) -> bool:
    """Log y for positive data spanning more than two decades (e.g. grad norms)."""
    v = values.dropna()
    return len(v) > 0 and bool((v > 0).all()) and math.log10(v.max() / v.min()) > 2


def is_fraction(values) -> bool:
    """Whether every finite value lies in [0, 1] (a share or a 0/1 reward): drawn as a percentage."""
    v = pd.to_numeric(pd.Series(values), errors="coerce")
    v = v[np.isfinite(v)]
    return len(v) > 0 and bool(((v >= 0) & (v <= 1)).all())
