"""Curves over seeds, one rule for every curve of the report: a thin line per seed, the mean over
the arm's seeds, and a band that is the 95% bootstrap interval of that mean (seeds resampled
with replacement, percentile interval), drawn from `MIN_BAND_SEEDS` seeds on (with two, every
resample is one of three and the "interval" is nearly the range of the two: the seeds' lines
say more). Never the min-max over seeds: its width grows with the number of seeds.

Per-step metrics are matched by step (`band_by_step`); curves against a continuous x
(trajectories, FLOPs, seconds) are interpolated onto the union of the seeds' x values inside the
range every seed covers (`band_on_grid`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from results.report.plotting import ArmStyle

BAND_BOOT = 2000
"""bootstrap replicates of a band"""
BAND_SEED = 0
"""the band's resampling seed (the same data gives the same figure)"""
MIN_BAND_SEEDS = 3
"""seeds an arm needs for a band (module docstring)"""
BAND = "95% bootstrap interval of the mean over seeds"
BAND_COLUMNS = ["arm", "mean", "ci_low", "ci_high", "n"]


def bootstrap_band(ys_S_G: np.ndarray, n_boot: int = BAND_BOOT, seed: int = BAND_SEED) -> tuple:
    """(mean_G, low_G, high_G) of seeds x grid values: the mean over seeds and its 95% percentile
    bootstrap interval, resampling whole seeds (one draw of seed indices for the whole curve;
    the grid in chunks, so that memory stays bounded on long curves)."""
    ys_S_G = np.asarray(ys_S_G, dtype=float)
    mean_G = ys_S_G.mean(axis=0)
    n_seeds, n_grid = ys_S_G.shape
    if n_seeds < 2:
        return mean_G, mean_G.copy(), mean_G.copy()
    idx_R_S = np.random.default_rng(seed).integers(0, n_seeds, size=(n_boot, n_seeds))
    low_G, high_G = np.empty(n_grid), np.empty(n_grid)
    chunk = max(1, 4_000_000 // (n_boot * n_seeds))
    for start in range(0, n_grid, chunk):
        part = slice(start, start + chunk)
        means_R_C = ys_S_G[:, part][idx_R_S].mean(axis=1)
        low_G[part], high_G[part] = np.quantile(means_R_C, [0.025, 0.975], axis=0)
    return mean_G, low_G, high_G


def band_by_step(metrics: pd.DataFrame, column: str, window: int = 1) -> pd.DataFrame:
    """Per (arm, step): the mean over seeds of `column` with its bootstrap band (`ci_low`,
    `ci_high`) over the seeds that have the step, and their count `n`. Each run's series is first
    smoothed with a centred rolling mean of `window` steps."""
    d = smoothed_runs(metrics, column, window)
    parts = []
    for arm, group in d.groupby("arm", sort=False):
        table = group.pivot_table(index="run", columns="step", values=column, aggfunc="last")
        full = table.notna().all(axis=0).to_numpy()
        # steps every seed has are bootstrapped together; the others (runs of unequal length) one by one
        blocks = [table.loc[:, full]] + [table[[step]].dropna() for step in table.columns[~full]]
        for block in (b for b in blocks if b.shape[1]):
            mean, low, high = bootstrap_band(block.to_numpy())
            frame = {"arm": arm, "step": block.columns, "mean": mean, "ci_low": low, "ci_high": high}
            parts.append(pd.DataFrame({**frame, "n": block.shape[0]}))
    if not parts:
        return pd.DataFrame(columns=["arm", "step", "mean", "ci_low", "ci_high", "n"])
    return (
        pd.concat(parts, ignore_index=True).sort_values(["arm", "step"], kind="stable").reset_index(drop=True)
    )


def smoothed_runs(metrics: pd.DataFrame, column: str, window: int = 1) -> pd.DataFrame:
    """The rows (arm, run, step, column) where `column` has a value, each run's series smoothed
    with a centred rolling mean of `window` steps: what a seed's thin line draws."""
    if column not in metrics:
        return pd.DataFrame(columns=["arm", "run", "step", column])
    d = metrics.loc[metrics[column].notna(), ["arm", "run", "step", column]].sort_values(["run", "step"])
    d[column] = pd.to_numeric(d[column], errors="coerce").astype(float)
    if window > 1 and len(d):
        rolled = d.groupby("run")[column].rolling(window, center=True, min_periods=1).mean()
        d[column] = rolled.reset_index(level=0, drop=True)
    return d


def band_on_grid(points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Per arm: the mean over seeds of `y` against a continuous `x` (columns arm, run, x, y) with
    its bootstrap band and the seed count `n`, each run interpolated onto the union of the runs'
    x values inside their common range."""
    parts = []
    for arm, arm_points in points.dropna(subset=[x, y]).groupby("arm", sort=False):
        runs = [g.sort_values(x).drop_duplicates(x, keep="last") for _, g in arm_points.groupby("run")]
        lo, hi = max(r[x].min() for r in runs), min(r[x].max() for r in runs)
        grid = np.unique(np.concatenate([r[x].to_numpy(dtype=float) for r in runs]))
        grid = grid[(grid >= lo) & (grid <= hi)]
        if grid.size == 0:
            continue
        ys = np.vstack(
            [np.interp(grid, r[x].to_numpy(dtype=float), r[y].to_numpy(dtype=float)) for r in runs]
        )
        mean, low, high = bootstrap_band(ys)
        frame = {"arm": arm, x: grid, "mean": mean, "ci_low": low, "ci_high": high, "n": len(runs)}
        parts.append(pd.DataFrame(frame))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def draw_arm(
    ax,
    band: pd.DataFrame,
    x: str,
    style: ArmStyle,
    label: str,
    seeds: pd.DataFrame | None = None,
    scale: float = 1.0,
    linestyle: str = "-",
    markers: bool = True,
) -> None:
    """One arm: a thin line per seed (`seeds`: columns run, x, y), the mean (with the arm's marker
    at about ten points) and its bootstrap band where at least `MIN_BAND_SEEDS` seeds have data;
    every value times `scale` (100: fractions drawn as %)."""
    if seeds is not None and seeds["run"].nunique() > 1:
        for _, run in seeds.groupby("run"):
            ax.plot(
                run[x], scale * run["y"], color=style.color, linewidth=0.45, alpha=0.35, linestyle=linestyle
            )
    ax.plot(
        band[x],
        scale * band["mean"],
        color=style.color,
        linestyle=linestyle,
        label=label,
        marker=style.marker if markers else None,
        markevery=spaced_indices(band[x].to_numpy(dtype=float)),
        markersize=3.2,
    )
    wide = band["n"] >= MIN_BAND_SEEDS
    if wide.any():
        ax.fill_between(
            band[x],
            scale * band["ci_low"],
            scale * band["ci_high"],
            where=wide.to_numpy(),
            color=style.color,
            alpha=0.18,
            linewidth=0,
        )


def spaced_indices(xs: np.ndarray, n: int = 10) -> list[int]:
    """Indices of about `n` points of increasing `xs` spread evenly over their range, none closer
    than half a spacing to the last kept: where the seeds' x values differ a little (model FLOPs at
    one evaluation step), the union grid bunches, and every k-th point put two markers side by side."""
    if xs.size == 0:
        return []
    span = float(xs[-1] - xs[0])
    if span <= 0:
        return [0]
    kept: list[int] = []
    for target in np.linspace(xs[0], xs[-1], n):
        i = int(np.abs(xs - target).argmin())
        if not kept or xs[i] - xs[kept[-1]] >= span / (2 * (n - 1)):
            kept.append(i)
    return kept


def seeds_phrase(counts: dict[str, int]) -> str:
    """What the lines and the band are, with the seeds per arm: 'n = 3 seeds per arm', ..."""
    if not counts:
        return ""
    lo, hi = min(counts.values()), max(counts.values())
    n = f"n = {lo}" if lo == hi else f"n = {lo}-{hi}"
    if hi == 1:
        return f"One seed per arm ({n}), so no band."
    band = f"band: {BAND}" + ("" if lo >= MIN_BAND_SEEDS else f" (arms with at least {MIN_BAND_SEEDS} seeds)")
    return f"Thin lines: each seed; thick: the mean over seeds ({n} seeds per arm); {band}."


def runs_per_arm(metrics: pd.DataFrame, column: str) -> dict[str, int]:
    """How many runs of each arm have any value of `column`."""
    if column not in metrics:
        return {}
    d = metrics.loc[metrics[column].notna(), ["arm", "run"]].drop_duplicates()
    return d.groupby("arm")["run"].nunique().to_dict()


def smoothing_window(n_steps: int) -> int:
    """Rolling-mean window for per-step curves: about 1/50 of the run (1 = no smoothing)."""
    return max(1, round(n_steps / 50))
