"""Figures of training curves from `metrics.jsonl`: evaluation accuracy (the paper's Fig. 3),
the critic (Fig. 4a, 4b), the clip ratio (Fig. 4c), online drift (Fig. 5a, 5b) and the
response-length collapse signature.

Each function takes a `Comparison` and a folder and returns the `Figure`s it wrote, or []
when the runs do not record what it plots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from results.comparison import Comparison
from results.report.plotting import (
    Figure,
    arm_colors,
    band_by_step,
    band_on_grid,
    draw_band,
    has_data,
    legend,
    new_figure,
    ordered_arms,
    runs_per_arm,
    save,
    seeds_phrase,
    smoothing_window,
    use_log_scale,
)

EVAL_KEY = re.compile(r"^eval/([^/]+)/avg_at_k$")
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
    """fixed y limits (None in one place: that end automatic); None: automatic, log for wide positive data"""


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
    """Per-step metrics of every arm that has them, one axes per panel: the mean over seeds
    with a min-max band, each run smoothed by a short rolling mean on long runs. `metrics`
    narrows the rows (default: all); `phases` shades the drift phases."""
    m = comparison.metrics if metrics is None else metrics
    if m.empty or "step" not in m or not any(has_data(m, s.column) for p in panels for s in p.series):
        return []
    colors = arm_colors(comparison.arms)
    window = smoothing_window(int(m["step"].max()))
    fig, axes = new_figure(width=5.2 * len(panels) + 1.2, panels=len(panels))
    counts: dict[str, int] = {}
    for ax, panel in zip(axes, panels):
        for s in (s for s in panel.series if has_data(m, s.column)):
            band, n = band_by_step(m, s.column, window), runs_per_arm(m, s.column)
            for arm in ordered_arms(comparison.arms, band["arm"].unique()):
                label = f"{arm}{' ' + s.label if s.label else ''} (n={n[arm]})"
                draw_band(ax, band[band["arm"] == arm], "step", colors.get(arm, "k"), label, s.linestyle)
                counts[arm] = max(counts.get(arm, 0), n[arm])
            if panel.ylim is None and use_log_scale(band["mean"]):
                ax.set_yscale("log")
        if panel.ylim is not None:
            lo, hi = (a if a is not None else b for a, b in zip(panel.ylim, ax.get_ylim()))
            ax.set_ylim(lo - 0.02 * (hi - lo) * (panel.ylim[1] is None), hi)  # a zero floor stays visible
        ax.set_xlabel("step")
        ax.set_ylabel(panel.ylabel)
        if phases:
            shade_phases(ax, m, colors)
    legend(axes[-1], loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(title, fontsize=11)
    smoothing = f" Each run smoothed with a centred {window}-step rolling mean." if window > 1 else ""
    return [save(fig, out_dir, key, title, f"{what} {seeds_phrase(counts)}{smoothing}", paper_ref)]


def eval_curves(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Fig. 3: in-training evaluation (avg@k) against trajectories trained and against wall
    time, two files per benchmark; step 0 is the evaluation before training."""
    m = comparison.metrics
    benches = [b.group(1) for b in map(EVAL_KEY.match, m.columns) if b and has_data(m, b.group(0))]
    if not benches or "step" not in m:
        return []
    budget = [c for c in ("budget/trajectories", "budget/elapsed_s") if c in m]
    m = m.sort_values(["run", "step"])
    filled = m.groupby("run")[budget].ffill().fillna(0.0) if budget else m[[]]
    figures = []
    for bench in benches:
        column = f"eval/{bench}/avg_at_k"
        points = pd.concat([m[["arm", "run", column]], filled], axis=1).rename(columns={column: "y"})
        for x, xname, xlabel in (
            ("budget/trajectories", "trajectories", "trajectories trained"),
            ("budget/elapsed_s", "time", "training wall time (s)"),
        ):
            if x in points:
                figures += _eval_figure(comparison, out_dir, bench, points, x, xname, xlabel)
    return figures


def _eval_figure(
    comparison: Comparison, out_dir: Path, bench: str, points: pd.DataFrame, x: str, xname: str, xlabel: str
) -> list[Figure]:
    """One benchmark's evaluation curves against one x (see `eval_curves`)."""
    band = band_on_grid(points[["arm", "run", x, "y"]], x, "y")
    if band.empty:
        return []
    colors, k = arm_colors(comparison.arms), _eval_k(comparison)
    fig, (ax,) = new_figure()
    counts = band.groupby("arm")["n"].max().to_dict()
    for arm in ordered_arms(comparison.arms, counts):
        draw_band(
            ax,
            band[band["arm"] == arm],
            x,
            colors.get(arm, "k"),
            f"{arm} (n={counts[arm]})",
            marker="o" if xname == "trajectories" else None,
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"{bench} avg@{k}")
    legend(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    title = f"{bench}: evaluation accuracy vs {'trajectories trained' if xname == 'trajectories' else 'wall time'}"
    ax.set_title(title, fontsize=11)
    caption = (
        f"In-training evaluation on {bench}: avg@{k} (correctness averaged over {k} samples per problem) "
        f"against {xlabel} ({x}; 0 = the evaluation before the first step). Seeds are interpolated "
        f"onto a common x grid where they all have data. {seeds_phrase(counts)}"
    )
    return [save(fig, out_dir, f"fig3_eval_vs_{xname}_{bench}", title, caption, "Fig. 3")]


def _eval_k(comparison: Comparison) -> str:
    """The comparison's evaluation k, or 'k' when unknown or not one value."""
    ks = {spec.get("eval", {}).get("k") for spec in comparison.specs}
    return str(ks.pop()) if len(ks) == 1 and None not in ks else "k"


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


def clip_ratio(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Fig. 4c: DIS's masked-token fraction (solid) and PPO-style clip fraction (dashed) by step."""
    series = (Series("policy/masked_frac", "masked (DIS)", "-"), Series("policy/clip_frac", "clipped", "--"))
    return step_figure(
        comparison,
        out_dir,
        key="fig4c_clip_ratio",
        paper_ref="Fig. 4c",
        title="Token clip ratio",
        panels=(Panel("fraction of action tokens", series, (0.0, None)),),
        what="Fraction of action tokens outside the trust region by learner step: DIS's masked fraction "
        "(policy/masked_frac, solid; the paper's clip ratio) and the clipped fraction of a PPO-style "
        "clipped surrogate (policy/clip_frac, dashed: PPO, VAPO, GRPO), arms that log either.",
    )


def length_figure(comparison: Comparison, out_dir: Path) -> list[Figure]:
    """Beyond the paper: mean response length and truncated share by step (a collapse shows
    as lengths running to the limit and the truncated share rising)."""
    panels = (
        Panel("action tokens per trajectory", (Series("rollout/action_tokens_mean"),)),
        Panel("truncated fraction", (Series("rollout/truncated_frac"),), ylim=(-0.02, 1.02)),
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
        panels=(Panel("reward", (Series("reward/mean"),), (-0.02, 1.02)),),
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
        panels=(Panel("label share", (Series("reward/style"),), (-0.02, 1.02)),),
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
