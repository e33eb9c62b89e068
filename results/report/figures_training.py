"""Figures of training curves by learner step from `metrics.jsonl`: the critic (Fig. 4a, 4b),
the clip ratio (Fig. 4c), online drift (Fig. 5a, 5b) and the response-length collapse signature.
(Reward and held-out score against trajectories, FLOPs and time: `results.report.curves`.)

Each function takes a `Comparison` and a folder and returns the `Figure`s it wrote, or []
when the runs do not record what it plots. A series that has one value at every step (a clip
fraction that is 0 because the clip cannot act) is not drawn but named in the caption; a panel
left with nothing is dropped, and a figure with nothing is not written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from results.comparison import Comparison
from results.report.bands import (
    band_by_step,
    draw_arm,
    runs_per_arm,
    seeds_phrase,
    smoothed_runs,
    smoothing_window,
)
from results.report.plotting import (
    COLUMN_IN,
    Figure,
    arm_colors,
    arm_style,
    has_data,
    is_constant,
    legend_below,
    new_figure,
    ordered_arms,
    save,
    styled,
    use_log_scale,
)

PHASE_COLORS = ("#ffffff", "#e8e8e8", "#fdf1d6", "#dcecf7")


@dataclass(frozen=True)
class Series:
    """One metric drawn for every arm that has it; `label` follows the arm name in the legend."""

    column: str
    label: str = ""
    linestyle: str = "-"


@dataclass(frozen=True)
class Panel:
    """One axes of a step figure."""

    ylabel: str
    series: tuple[Series, ...]
    ylim: tuple[float | None, float | None] | None = None
    """fixed y limits in the drawn unit (None in one place: that end automatic); None: automatic,
    log for wide positive data"""
    percent: bool = False
    """the metric is a fraction: drawn x100 (the label says %)"""


def _drawable(m: pd.DataFrame, panel: Panel) -> tuple[list[tuple[Series, str]], list[str]]:
    """((series, arm) pairs worth drawing, the names of those left out as constant)."""
    keep, flat = [], []
    for s in (s for s in panel.series if has_data(m, s.column)):
        rows = m[m[s.column].notna()]
        for arm, group in rows.groupby("arm", sort=False):
            name = f"{arm}{' ' + s.label if s.label else ''}"
            if is_constant(group[s.column]):
                value = float(pd.to_numeric(group[s.column]).iloc[0]) * (100 if panel.percent else 1)
                flat.append(f"{name} ({s.column} = {value:g}{'%' if panel.percent else ''} at every step)")
            else:
                keep.append((s, arm))
    return keep, flat


def step_figure(
    comparison: Comparison,
    out_dir: Path,
    *,
    key: str,
    title: str,
    what: str,
    panels: tuple[Panel, ...],
    paper_ref: str | None = None,
    metrics: pd.DataFrame | None = None,
    phases: bool = False,
) -> list[Figure]:
    """Per-step metrics of every arm that has them, one axes per panel that has something to draw
    (module docstring): a thin line per seed, the mean over seeds and its bootstrap band
    (`results.report.bands`), each run smoothed by a short rolling mean on long runs. `metrics`
    narrows the rows (default: all); `phases` shades the drift phases."""
    m = comparison.metrics if metrics is None else metrics
    if m.empty or "step" not in m or not any(has_data(m, s.column) for p in panels for s in p.series):
        return []
    drawable = [(p, *_drawable(m, p)) for p in panels]
    flat = [name for _, _, names in drawable for name in names]
    shown = [(p, keep) for p, keep, _ in drawable if keep]
    if not shown:
        return []
    window = smoothing_window(int(m["step"].max()))
    fig, axes = new_figure(width=COLUMN_IN * len(shown), panels=len(shown))
    counts: dict[str, int] = {}
    for ax, (panel, keep) in zip(axes, shown):
        _draw_panel(ax, m, panel, keep, window, counts, comparison.arms)
        if phases:
            shade_phases(ax, m, arm_colors(comparison.arms))
    legend_below(fig, None)
    smoothing = f" Each run smoothed with a centred {window}-step rolling mean." if window > 1 else ""
    caption = f"{what} {seeds_phrase(counts)}{smoothing}"
    if flat:
        caption += f" Not drawn: {'; '.join(flat)}."
    return [save(fig, out_dir, key, title, caption, paper_ref)]


def _draw_panel(ax, m, panel: Panel, keep, window: int, counts: dict, arms: list[str]) -> None:
    """One panel of `step_figure`: its (series, arm) pairs, its scale and limits."""
    scale = 100.0 if panel.percent else 1.0
    for s in dict.fromkeys(s for s, _ in keep):
        band, n = band_by_step(m, s.column, window), runs_per_arm(m, s.column)
        seeds = smoothed_runs(m, s.column, window).rename(columns={s.column: "y"})
        for arm in ordered_arms(arms, [a for t, a in keep if t == s]):
            label = f"{arm}{' ' + s.label if s.label else ''} (n={n[arm]})"
            mine = seeds[seeds["arm"] == arm]
            draw_arm(ax, band[band["arm"] == arm], "step", arm_style(arm), label, mine, scale, s.linestyle)
            counts[arm] = max(counts.get(arm, 0), n[arm])
        if panel.ylim is None and use_log_scale(band["mean"]):
            ax.set_yscale("log")
    if panel.ylim is not None:
        lo, hi = (a if a is not None else b for a, b in zip(panel.ylim, ax.get_ylim()))
        ax.set_ylim(lo - 0.02 * (hi - lo) * (panel.ylim[1] is None), hi)  # a zero floor stays visible
    ax.set_xlabel("learner step")
    ax.set_ylabel(panel.ylabel + (" (%)" if panel.percent else ""))


@styled
def critic_figures(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Fig. 4a (critic explained variance) and Fig. 4b (critic grad norm) by step, every arm with a critic."""
    ev = step_figure(
        comparison,
        out_dir,
        key="fig4a_critic_explained_variance",
        paper_ref="Fig. 4a",
        title="Critic explained variance",
        panels=(Panel("explained variance", (Series("value/explained_variance"),)),),
        what="Explained variance of the critic's values against the returns (value/explained_variance; "
        "1 = perfect, 0 = no better than a constant) by learner step, arms with a critic.",
    )
    gn = step_figure(
        comparison,
        out_dir,
        key="fig4b_critic_grad_norm",
        paper_ref="Fig. 4b",
        title="Critic gradient norm",
        panels=(Panel("critic grad norm", (Series("value/grad_norm"),)),),
        what="Gradient norm of the critic's updates (value/grad_norm, before clipping) by learner step, "
        "arms with a critic (the paper contrasts a full-parameter and a frozen-attention critic).",
    )
    return ev + gn


@styled
def clip_ratio(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Fig. 4c: DIS's masked-token fraction (solid) and PPO-style clip fraction (dashed) by step."""
    series = (Series("policy/masked_frac", "masked (DIS)", "-"), Series("policy/clip_frac", "clipped", "--"))
    return step_figure(
        comparison,
        out_dir,
        key="fig4c_clip_ratio",
        paper_ref="Fig. 4c",
        title="Token clip ratio",
        panels=(Panel("share of action tokens", series, (0.0, None), percent=True),),
        what="Fraction of action tokens outside the trust region by learner step: DIS's masked fraction "
        "(policy/masked_frac, solid; the paper's clip ratio) and the clipped fraction of a PPO-style "
        "clipped surrogate (policy/clip_frac, dashed: PPO, VAPO, GRPO), arms that log either.",
    )


@styled
def length_figure(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Beyond the paper: mean response length and truncated share by step (a collapse shows
    as lengths running to the limit and the truncated share rising)."""
    panels = (
        Panel("action tokens per trajectory", (Series("rollout/action_tokens_mean"),)),
        Panel("truncated", (Series("rollout/truncated_frac"),), ylim=(0.0, None), percent=True),
    )
    return step_figure(
        comparison,
        out_dir,
        key="length_truncation",
        title="Response length and truncation",
        panels=panels,
        what="Mean model-generated tokens per trajectory (rollout/action_tokens_mean, left) and the share "
        "of trajectories cut at the length limit (rollout/truncated_frac, right) per learner step.",
    )


@styled
def drift_figures(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Fig. 5a (training reward) and Fig. 5b (share following the phase's label rule) by step
    for runs of a drifting task, phases shaded."""
    m = comparison.metrics
    if not has_data(m, "drift/phase"):
        return []
    drift = m[m["run"].isin(m.loc[m["drift/phase"].notna(), "run"].unique())]
    phase_note = (
        "Shading: the phase (the rewarded rule) of each step's episodes (drift/phase, median over runs); "
        "dotted lines in an arm's colour: where that arm's batches switched phase (asynchronous rollouts "
        "are drawn ahead of training, so arms can switch a step or two apart)."
    )
    reward = step_figure(
        comparison,
        out_dir,
        key="fig5a_drift_reward",
        paper_ref="Fig. 5a",
        metrics=drift,
        phases=True,
        title="Online drift: training reward",
        panels=(Panel("training reward", (Series("reward/mean"),), (-2.0, 102.0), percent=True),),
        what=f"Mean training reward (reward/mean) per step on the drifting task. {phase_note}",
    )
    style = step_figure(
        comparison,
        out_dir,
        key="fig5b_drift_label_share",
        paper_ref="Fig. 5b",
        metrics=drift,
        phases=True,
        title="Online drift: share following the current rule",
        panels=(Panel("label share", (Series("reward/style"),), (-2.0, 102.0), percent=True),),
        what=f"Share of trajectories whose answer follows the current phase's rule (reward/style) per "
        f"step (a policy that adapts drops at each switch and climbs back within the phase). {phase_note}",
    )
    return reward + style


def shade_phases(ax, metrics: pd.DataFrame, colors: dict[str, str]) -> None:
    """Shade the stretches of steps in each drift phase (the median over runs of the step's
    mean episode phase, rounded half up), name them at the top of the axes, and mark with a
    dotted line in each arm's colour where that arm's batches switched phase."""
    d = metrics.dropna(subset=["drift/phase"])
    if d.empty:
        return
    for phase, lo, hi in _phase_stretches(d.groupby("step")["drift/phase"].median()):
        ax.axvspan(lo, hi, color=PHASE_COLORS[phase % len(PHASE_COLORS)], alpha=0.8, zorder=0, linewidth=0)
        ax.text(
            (lo + hi) / 2,
            0.99,
            f"phase {phase}",
            transform=ax.get_xaxis_transform(),
            ha="center",
            va="top",
            fontsize=7,
            color="0.35",
        )
    for arm, part in d.groupby("arm"):
        for _, lo, _ in _phase_stretches(part.groupby("step")["drift/phase"].mean())[1:]:
            ax.axvline(lo, color=colors.get(arm, "k"), linestyle=":", linewidth=1.1, alpha=0.9)


def _phase_stretches(per_step: pd.Series) -> list[tuple[int, float, float]]:
    """(phase, first step - 0.5, last step + 0.5) of each run of equal rounded phase."""
    phase = np.floor(per_step.to_numpy() + 0.5).astype(int)
    steps = per_step.index.to_numpy()
    starts = np.flatnonzero(np.r_[True, phase[1:] != phase[:-1]])
    ends = np.r_[starts[1:], len(steps)] - 1
    return [(int(phase[a]), steps[a] - 0.5, steps[b] + 0.5) for a, b in zip(starts, ends)]
