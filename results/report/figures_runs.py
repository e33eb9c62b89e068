"""Figures of how rollouts and the learner overlapped, from each run's `timeline.jsonl`: the
staleness histogram and a rollout/learner timeline (the paper's Fig. 2 schematic, drawn from
real data).

A timeline line is one learner step: {"step", "consumed_at", "learner_version", "trajs": [[start,
finish, oldest_version, newest_version, action_tokens, used], ...]} (`bench/train/metrics.py`).
"""

from __future__ import annotations

import functools
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.cm import ScalarMappable
from matplotlib.collections import PolyCollection
from matplotlib.colors import BoundaryNorm
from matplotlib.figure import Figure as MplFigure
from matplotlib.patches import Patch

from results.comparison import Comparison
from results.report.plotting import (
    DPI,
    TEXT_IN,
    Figure,
    arm_colors,
    has_data,
    legend_below,
    new_figure,
    ordered_arms,
    save,
    styled,
)
from results.rundir import RunDir

TIMELINE_STEPS = 8
"""the timeline figure shows a run's first learner steps ..."""
TIMELINE_SECONDS = 40.0
"""... and at most this many seconds from its first rollout"""
COLUMNS = ["start", "finish", "oldest", "newest", "tokens", "used"]


def timeline_frame(comparison: Comparison, run: str) -> pd.DataFrame:
    """One row per trajectory of a run's timeline: the COLUMNS, the learner `step` that took it,
    `consumed_at` and `staleness` (learner version at consumption minus its oldest token's version).
    Read once per file version (cached by path, size and mtime): several figures use it."""
    path = Path(comparison.runs.set_index("run").loc[run, "path"]) / "timeline.jsonl"
    stat = path.stat() if path.exists() else None
    return _read_timeline(str(path.parent), stat and (stat.st_size, stat.st_mtime_ns)).copy()


@functools.lru_cache(maxsize=32)
def _read_timeline(run_dir: str, stamp: tuple[int, int] | None) -> pd.DataFrame:
    """`timeline_frame` of the run directory `run_dir` (`stamp` only keys the cache)."""
    lines = RunDir(run_dir).read_timeline() if stamp else []
    rows = [t for line in lines for t in line["trajs"]]
    if not rows:
        return pd.DataFrame(columns=[*COLUMNS, "step", "consumed_at", "staleness"], dtype=float)
    frame = pd.DataFrame(np.asarray(rows, dtype=float), columns=COLUMNS)
    sizes = [len(line["trajs"]) for line in lines]
    for key in ("step", "consumed_at", "learner_version"):
        frame[key] = np.repeat([line[key] for line in lines], sizes)
    frame["staleness"] = frame.pop("learner_version") - frame["oldest"]
    return frame


def _timelines(comparison: Comparison) -> dict[str, tuple[str, pd.DataFrame]]:
    """run -> (arm, its timeline frame), runs with a non-empty timeline only."""
    out = {}
    for run, arm in comparison.runs[["run", "arm"]].itertuples(index=False) if len(comparison.runs) else ():
        frame = timeline_frame(comparison, run)
        if len(frame):
            out[run] = (arm, frame)
    return out


@styled
def staleness_histogram(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Beyond the paper: how stale the trajectories were, per arm (pooled over seeds) from the
    timelines; without any timeline, the distribution of the per-step mean staleness."""
    timelines = _timelines(comparison)
    if not timelines:
        return _mean_staleness_histogram(comparison, out_dir)
    frame = pd.concat([f.assign(arm=arm) for arm, f in timelines.values()], ignore_index=True)
    counts = frame.groupby(["arm", "staleness", "used"]).size().unstack("used", fill_value=0)
    counts = counts.reindex(columns=[0.0, 1.0], fill_value=0)
    total = counts.groupby("arm").sum().sum(axis=1)
    arms = ordered_arms(comparison.arms, total.index)
    colors, width = arm_colors(comparison.arms), 0.8 / len(arms)
    fig, (ax,) = new_figure()
    for i, arm in enumerate(arms):
        c = 100 * counts.loc[arm] / total[arm]
        x = c.index.to_numpy() + (i - (len(arms) - 1) / 2) * width
        ax.bar(x, c[1.0], width, color=colors.get(arm, "k"), label=f"{arm} ({_runs(timelines, arm)} runs)")
        if c[0.0].any():
            ax.bar(
                x,
                c[0.0],
                width,
                bottom=c[1.0],
                color="white",
                edgecolor=colors.get(arm, "k"),
                hatch="///",
                linewidth=0.6,
            )
    discarded = Patch(facecolor="white", edgecolor="0.3", hatch="///", label="discarded (stale or filtered)")
    ax.set_xlabel("staleness (policy versions)")
    ax.set_ylabel("trajectories (%)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    legend_below(fig, ax, columns=2, extra=(discarded,) if counts[0.0].any() else ())
    title = "Staleness of trajectories"
    caption = (
        "Per arm, the share of trajectories at each staleness (how many policy versions the learner had "
        "moved past the oldest token's version when it took the trajectory), from timeline.jsonl, pooled "
        "over the arm's seeds (no band: a distribution). Solid: trained on; hatched: discarded."
    )
    missing = [a for a in comparison.arms if a not in arms]
    caption += f" Arms without a timeline (not shown): {', '.join(missing)}." if missing else ""
    return [save(fig, out_dir, "staleness_histogram", title, caption, None)]


def _runs(timelines: dict[str, tuple[str, pd.DataFrame]], arm: str) -> int:
    return sum(a == arm for a, _ in timelines.values())


def _mean_staleness_histogram(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """The fallback of `staleness_histogram`: histogram of per-step `staleness/mean`."""
    m = comparison.metrics
    if not has_data(m, "staleness/mean"):
        return []
    d = m.dropna(subset=["staleness/mean"])
    colors = arm_colors(comparison.arms)
    bins = np.linspace(0, max(float(d["staleness/mean"].max()), 1.0), 21)
    fig, (ax,) = new_figure()
    for arm in ordered_arms(comparison.arms, d["arm"].unique()):
        values = d.loc[d["arm"] == arm, "staleness/mean"]
        ax.hist(
            values,
            bins=bins,
            histtype="step",
            linewidth=1.6,
            color=colors.get(arm, "k"),
            weights=np.full(len(values), 100 / len(values)),
            label=f"{arm} ({d.loc[d['arm'] == arm, 'run'].nunique()} runs)",
        )
    ax.set_xlabel("mean staleness of a step's batch (policy versions)")
    ax.set_ylabel("steps (%)")
    legend_below(fig, ax, columns=2)
    title = "Staleness of trajectories (per-step means)"
    caption = (
        "The runs have no timeline.jsonl, so this is the distribution over learner steps of the batch's "
        "mean staleness (staleness/mean), pooled over each arm's seeds (no band: a distribution)."
    )
    return [save(fig, out_dir, "staleness_histogram", title, caption, None)]


@styled
def rollout_timeline(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """The paper's Fig. 2 from real data: one run per arm (its lowest seed), the first
    TIMELINE_STEPS learner steps (at most TIMELINE_SECONDS): a bar per trajectory from
    generation start to finish, packed into lanes, coloured by the policy version of its
    oldest token (outlined only: discarded), and a dotted line where the learner took each step."""
    chosen: dict[str, tuple[str, pd.DataFrame]] = {}
    runs = comparison.runs.sort_values(["seed", "run"]) if len(comparison.runs) else comparison.runs
    for run, arm in runs[["run", "arm"]].itertuples(index=False) if len(runs) else ():
        if arm not in chosen and len(frame := timeline_frame(comparison, run)):
            chosen[arm] = (run, _window(frame))
    if not chosen:
        return []
    arms = ordered_arms(comparison.arms, chosen)
    vmax = int(max(f["oldest"].max() for _, f in chosen.values()))
    norm = BoundaryNorm(np.arange(-0.5, vmax + 1.5), matplotlib.colormaps["viridis"].N)
    mappable = ScalarMappable(norm=norm, cmap="viridis")
    fig = MplFigure(figsize=(TEXT_IN, 0.5 + 1.4 * len(arms)), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(arms), 1, sharex=True, squeeze=False)[:, 0]
    for ax, arm in zip(axes, arms):
        _draw_timeline(ax, *chosen[arm], mappable, arm_colors(comparison.arms).get(arm, "k"))
    # the panels share one time axis: it must reach the longest window, or the step labels of
    # a longer one fall beyond it (and outside the figure)
    axes[-1].set_xlim(0, max(part.attrs["end"] for _, part in chosen.values()) * 1.02)
    axes[-1].set_xlabel("seconds since the run's first rollout")
    fig.colorbar(
        mappable, ax=list(axes), label="policy version (oldest token)", ticks=_ticks(vmax), shrink=0.8
    )
    if any((f["used"] == 0).any() for _, f in chosen.values()):
        discarded = Patch(facecolor="white", edgecolor="red", label="discarded")
        axes[0].legend(handles=[discarded], fontsize=7, frameon=False, loc="lower right")
    title = "Rollouts and learner steps over time"
    caption = (
        f"One run per arm (lowest seed), the first {TIMELINE_STEPS} learner steps or {TIMELINE_SECONDS:.0f} s: "
        "each bar is a trajectory from generation start to finish (rows: trajectories packed into lanes, "
        "so the number of rows is the concurrency), coloured by the policy version of its oldest token; "
        "red outline: discarded. Dotted lines: the learner takes step k. From timeline.jsonl."
    )
    return [save(fig, out_dir, "fig2_rollout_timeline", title, caption, "Fig. 2")]


def _window(frame: pd.DataFrame) -> pd.DataFrame:
    """The trajectories that started before the window's end, with times relative to the run's
    first rollout, and the window's end (`attrs["end"]`)."""
    t0 = frame["start"].min()
    consumed = np.sort(frame["consumed_at"].unique())
    end = min(consumed[min(TIMELINE_STEPS, len(consumed)) - 1], t0 + TIMELINE_SECONDS)
    end = max(end, consumed[0])
    part = frame[frame["start"] <= end].copy()
    for key in ("start", "finish", "consumed_at"):
        part[key] -= t0
    part.attrs["end"] = end - t0
    return part


def _lanes(start: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Greedy interval packing: each trajectory (in start order) takes the first lane free by its start."""
    order, lane_end, lanes = np.argsort(start, kind="stable"), [], np.zeros(len(start), dtype=int)
    for i in order:
        free = next((j for j, e in enumerate(lane_end) if e <= start[i]), len(lane_end))
        if free == len(lane_end):
            lane_end.append(0.0)
        lane_end[free], lanes[i] = finish[i], free
    return lanes


def _draw_timeline(ax, run: str, part: pd.DataFrame, mappable: ScalarMappable, color: str) -> None:
    """One arm's panel of `rollout_timeline`."""
    lanes = _lanes(part["start"].to_numpy(), part["finish"].to_numpy())
    used = part["used"].to_numpy() > 0
    widths = (part["finish"] - part["start"]).to_numpy()
    left, face = part["start"].to_numpy(), mappable.to_rgba(part["oldest"].to_numpy())
    _bars(ax, left[used], widths[used], lanes[used], facecolors=face[used], linewidths=0)
    if (~used).any():
        _bars(
            ax, left[~used], widths[~used], lanes[~used], facecolors="white", edgecolors="red", linewidths=0.7
        )
    end = part.attrs["end"]
    steps = part.drop_duplicates("step").sort_values("consumed_at")
    for step, at in steps[["step", "consumed_at"]].itertuples(index=False):
        if at <= end * 1.001:
            ax.axvline(at, color="0.2", linestyle=":", linewidth=1.0)
            ax.text(
                at,
                1.0,
                f"{int(step)}",
                transform=ax.get_xaxis_transform(),
                ha="center",
                va="bottom",
                fontsize=7,
                color="0.2",
            )
    ax.set_ylim(lanes.max() + 1, -1)
    ax.set_ylabel(f"{run}\nrollout lane", fontsize=8, color=color)
    ax.tick_params(axis="y", labelsize=7)
    ax.spines[["top", "right"]].set_visible(False)


def _bars(ax, left: np.ndarray, width: np.ndarray, lanes: np.ndarray, **style) -> None:
    """Horizontal bars as one PolyCollection (thousands of `barh` patches draw far slower)."""
    x0, x1, y0, y1 = left, left + width, lanes - 0.42, lanes + 0.42
    corners = np.stack([np.c_[x0, y0], np.c_[x0, y1], np.c_[x1, y1], np.c_[x1, y0]], axis=1)  # (n, 4, 2)
    ax.add_collection(PolyCollection(corners, **style))


def _ticks(vmax: int) -> list[int]:
    step = max(1, int(np.ceil((vmax + 1) / 10)))
    return list(range(0, vmax + 1, step))
