"""The report's figures: one per paper figure where the runs hold the data, plus a few beyond it.

    write_figures(comparison, out_dir, final_scores) -> [Figure, ...]

| file stem                                | paper   | needs                                                  |
|------------------------------------------|---------|--------------------------------------------------------|
| fig1_final_scores                        | Fig. 1  | `final_scores` (arm, benchmark, mean, ci_low, ci_high) |
| fig2_rollout_timeline                    | Fig. 2  | timeline.jsonl                                         |
| fig3_eval_vs_{trajectories,flops,time}_<bench> | Fig. 3 | eval/<bench>/avg_at_k, budget/{trajectories,flops,elapsed_s} |
| reward_vs_{trajectories,flops,time}      | -       | reward/mean, budget/{trajectories,flops,elapsed_s}     |
| fig4a_critic_explained_variance          | Fig. 4a | value/explained_variance                               |
| fig4b_critic_grad_norm                   | Fig. 4b | value/grad_norm                                        |
| fig4c_clip_ratio                         | Fig. 4c | policy/masked_frac and/or policy/clip_frac             |
| fig5a_drift_reward, fig5b_drift_label_share | Fig. 5 | drift/phase, reward/mean, reward/style               |
| length_truncation                        | -       | rollout/action_tokens_mean, rollout/truncated_frac     |
| staleness_histogram                      | -       | timeline.jsonl (else staleness/mean)                   |
| stability_survival                       | -       | reward/mean per step, outcome (`results.collapse`)     |
| compute_curves_<bench>                   | -       | eval/<bench>/avg_at_k at steps 0.., budget/flops       |

Every function returns the `Figure`s it wrote, or [] when the data is missing. Curves are a
thin line per seed, the mean over seeds and its bootstrap band (`results.report.bands`). The
bottom line's figures (forest plot, interval estimates, probability of improvement) are made
from the report's tables: `results.report.bottom_figures`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from results.comparison import Comparison
from results.report.compute_curves import compute_curve_figures
from results.report.curves import learning_curves
from results.report.figures_runs import rollout_timeline, staleness_histogram
from results.report.figures_training import (
    clip_ratio,
    critic_figures,
    drift_figures,
    length_figure,
)
from results.report.plotting import (
    COLUMN_IN,
    TEXT_IN,
    Figure,
    arm_style,
    legend_below,
    new_figure,
    ordered_arms,
    save,
    styled,
)
from results.report.stability import survival_figure

__all__ = ["Figure", "final_scores_figure", "write_figures"]

SCORE_COLUMNS = ("arm", "benchmark", "mean", "ci_low", "ci_high")


def write_figures(
    comparison: Comparison, out_dir: Path, final_scores: pd.DataFrame | None = None
) -> list[Figure]:
    """Every figure the comparison has data for, written as PNG and SVG under `out_dir`, in
    the paper's order (beyond-the-paper figures last)."""
    out_dir = Path(out_dir)
    figures = final_scores_figure(final_scores, out_dir, arms=comparison.arms)
    for make in (
        rollout_timeline,
        learning_curves,
        critic_figures,
        clip_ratio,
        drift_figures,
        length_figure,
        staleness_histogram,
        survival_figure,
        compute_curve_figures,
    ):
        figures += make(comparison, out_dir)
    return figures


@styled
def final_scores_figure(
    final_scores: pd.DataFrame | None, out_dir: Path, arms: list[str] | None = None
) -> list[Figure]:
    """Fig. 1: grouped bars of the final score (%) per benchmark and arm with 95% CI error bars.

    `final_scores`: one row per (arm, benchmark) with `mean`, `ci_low`, `ci_high` in [0, 1]
    (the report's table of final scores; an optional `n_seeds` or `n` column is the seeds per
    arm, named in the caption). `arms` fixes the order (default: the frame's order); colours are
    the arms' own (`arm_style`). [] when the frame is missing, empty or lacks a column."""
    if final_scores is None or final_scores.empty or not set(SCORE_COLUMNS) <= set(final_scores.columns):
        return []
    df = final_scores.dropna(subset=["mean"])
    if df.empty:
        return []
    benches = list(dict.fromkeys(df["benchmark"]))
    order = ordered_arms(list(arms or []) + list(dict.fromkeys(df["arm"])), df["arm"].unique())
    width = 0.8 / len(order)
    bars_n = len(benches) * len(order)
    fig, (ax,) = new_figure(width=COLUMN_IN if bars_n <= 8 else TEXT_IN)
    for i, arm in enumerate(order):
        rows = df[df["arm"] == arm].set_index("benchmark").reindex(benches)
        mean = 100 * rows["mean"].to_numpy(dtype=float)
        err = 100 * np.vstack([rows["mean"] - rows["ci_low"], rows["ci_high"] - rows["mean"]]).astype(float)
        x = np.arange(len(benches)) + (i - (len(order) - 1) / 2) * width
        ax.bar(
            x,
            mean,
            width * 0.92,
            color=arm_style(arm).color,
            label=arm,
            yerr=np.clip(np.nan_to_num(err), 0, None),
            capsize=1.5,
            error_kw={"linewidth": 0.7},
        )
    ax.set_xticks(np.arange(len(benches)), benches)
    ax.set_ylabel("final score (%)")
    top = np.nanmax(100 * df["ci_high"].fillna(df["mean"]).to_numpy(dtype=float))
    ax.set_ylim(0, min(100.0, top * 1.1) if top > 0 else 1.0)
    ax.grid(False, axis="x")
    legend_below(fig, ax)
    seeds = ""
    n = next((df[c] for c in ("n_seeds", "n") if c in df and df[c].notna().any()), None)
    if n is not None:
        lo, hi = int(n.min()), int(n.max())
        seeds = f" (n = {lo} seeds per arm)" if lo == hi else f" (n = {lo}-{hi} seeds per arm)"
    caption = (
        f"Final evaluation of each arm's selected checkpoint: bar = mean score over seeds{seeds}, "
        "error bars = its 95% confidence interval as the report's final-scores table gives it, in percent."
    )
    return [save(fig, out_dir, "fig1_final_scores", "Final scores by benchmark and arm", caption, "Fig. 1")]
