"""The comparison's tables, computed from run directories only (nothing typed by hand):

- scores: per arm and benchmark, the mean avg@k over seeds with a 95% CI from a two-level
  bootstrap over training seeds and problems (`benchmarks.run_stats`), n problems x k samples;
- per-seed scores, every run kept (failed and stopped ones included, marked);
- differences against a baseline arm (`results.report.differences`): problems paired, seeds
  independent; the bootstrap's and a seed-level (Welch) 95% interval, p-values and a verdict
  that needs both, with the probability of improvement across seeds;
- aggregate: interquartile mean across seeds and benchmarks (rliable), with its CI;
- budget and consumption per arm; every run's outcome;
- the paper's table layouts with this harness's numbers beside the paper's.

A score cell is one (seed, problem): the fraction of that problem's k samples that are correct
(`results.report.score_matrix` keeps the counts, written beside the tables).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.run_stats import format_p, iqm_ci, stratified_bootstrap_ci
from results.comparison import Comparison
from results.report.paper import BENCHMARK_COLUMNS, PAPER_SCALE, TABLES, is_swe_benchmark
from results.report.score_matrix import cell_counts, matrices_from_counts


def score_matrices(comparison: Comparison) -> dict[tuple[str, str], pd.DataFrame]:
    """(arm, benchmark) -> a seeds x problems frame of per-problem scores (fraction correct)."""
    return matrices_from_counts(cell_counts(comparison))[0]


def final_scores(matrices: dict, ks: dict, arms: list[str], n_boot: int = 10000) -> pd.DataFrame:
    """Mean and 95% CI of every arm on every benchmark (columns: arm, benchmark, mean, ci_low,
    ci_high, n_seeds, n_problems, k); `ks`: samples per problem of each (arm, benchmark)."""
    rows = []
    for (arm, bench), m in matrices.items():
        m = m.dropna(axis=1)  # a problem missing from one seed's evaluation cannot be paired
        ci = stratified_bootstrap_ci(m.to_numpy(), n_boot=n_boot)
        rows.append(
            {
                "arm": arm,
                "benchmark": bench,
                "mean": ci["mean"],
                "ci_low": ci["ci_low"],
                "ci_high": ci["ci_high"],
                "n_seeds": ci["n_seeds"],
                "n_problems": ci["n_problems"],
                "k": ks.get((arm, bench)),
            }
        )
    return _in_arm_order(pd.DataFrame(rows), arms)


def per_seed_scores(comparison: Comparison) -> pd.DataFrame:
    """avg@k of every run on every benchmark, with the run's state (columns: arm, seed,
    benchmark, avg_at_k, state)."""
    runs = comparison.runs[["run", "arm", "seed", "state"]]
    if comparison.summaries.empty:
        return runs.assign(benchmark=None, avg_at_k=None)
    scores = comparison.summaries[["run", "benchmark", "avg_at_k"]]
    table = runs.merge(scores, on="run", how="left")[["arm", "seed", "benchmark", "avg_at_k", "state"]]
    return _in_arm_order(table, comparison.arms)


def aggregate(comparison: Comparison, n_boot: int = 10000) -> pd.DataFrame:
    """Interquartile mean of each arm across its seeds x benchmarks (rliable's IQM), with a CI
    that resamples seeds; only where an arm has at least 2 seeds."""
    scores = per_seed_scores(comparison).dropna(subset=["avg_at_k"])
    rows = []
    for arm, group in scores.groupby("arm", sort=False):
        table = group.pivot_table(index="seed", columns="benchmark", values="avg_at_k").dropna()
        if len(table) < 2:
            continue
        ci = iqm_ci(table.to_numpy(), n_boot=n_boot)
        rows.append(
            {
                "arm": arm,
                "iqm": ci["iqm"],
                "ci_low": ci["ci_low"],
                "ci_high": ci["ci_high"],
                "n_seeds": ci["n_seeds"],
                "n_benchmarks": table.shape[1],
            }
        )
    return _in_arm_order(pd.DataFrame(rows), comparison.arms)


def budget_table(comparison: Comparison) -> pd.DataFrame:
    """What each arm consumed (mean over its runs, min-max in brackets): steps, trajectories,
    tokens, model FLOPs ("not counted" for runs from before they were), wall time, the critic's
    share of learner time and of the FLOPs, the median seconds of a step and the peak resident
    memory of the learner and engine processes ("-" for runs from before they were recorded;
    shared weights count in both); its policy updates per batch and its runs' states."""
    runs = comparison.runs
    rows = []
    for arm in comparison.arms:
        group = runs[runs["arm"] == arm]
        row = {
            "arm": arm,
            "runs": len(group),
            "states": ", ".join(f"{n} {s}" for s, n in group["state"].value_counts().items()),
            "updates per batch": _distinct(group.get("updates_per_batch")),
        }
        flops = _numbers(group, "flops")
        for label, values, fmt in (
            ("policy steps", _numbers(group, "steps"), _COUNT),
            ("trajectories", _numbers(group, "trajectories"), _COUNT),
            ("generated tokens", _numbers(group, "generated_tokens"), _COUNT),
            ("model FLOPs", flops, _SCIENTIFIC),
            ("wall s", _numbers(group, "elapsed_s"), _COUNT),
            ("critic share of learner time", _numbers(group, "critic_share"), _PERCENT),
            ("critic share of FLOPs", _numbers(group, "critic_flops", over="flops"), _PERCENT),
            ("s per step (median)", _numbers(group, "step_s"), _TENTHS),
            ("learner peak GiB", _numbers(group, "learner_peak_rss_gib"), _TENTHS),
            ("engine peak GiB", _numbers(group, "engine_peak_rss_gib"), _TENTHS),
        ):
            row[label] = _mean_range(values, fmt)
        if not len(flops):
            row["model FLOPs"] = row["critic share of FLOPs"] = "not counted"
        rows.append(row)
    return pd.DataFrame(rows)


def _numbers(group: pd.DataFrame, column: str, over: str | None = None) -> pd.Series:
    """The column's numbers of an arm's runs (`over`: divided by that column's), missing ones dropped."""
    if column not in group or (over is not None and over not in group):
        return pd.Series(dtype=float)
    values = pd.to_numeric(group[column], errors="coerce")
    if over is not None:
        values = values / pd.to_numeric(group[over], errors="coerce")
    return values.dropna()


def _distinct(values: pd.Series | None) -> str:
    """The distinct values of a setting across an arm's runs ("1", or "1, 4" where they differ)."""
    found = [] if values is None else sorted({int(v) for v in values.dropna()})
    return ", ".join(map(str, found)) if found else "-"


def tuning_table(comparison: Comparison) -> pd.DataFrame:
    """How each arm's parameters were chosen: the shared defaults of its comparison, a sweep's
    best trial (`bench compare --params-from-sweep`) with the tuning budget every arm was
    given, or, for run directories given alone, as each run was configured."""
    tuning_of = {arm["name"]: spec.get("tuning") for spec in comparison.specs for arm in spec.get("arms", [])}
    own = {arm["name"]: _own_settings(arm) for spec in comparison.specs for arm in spec.get("arms", [])}
    rows = []
    for name in comparison.arms:
        row = {
            "arm": name,
            "tuning": "shared defaults",
            "tuned on": "-",
            "best trial": "-",
            "objective": "-",
            "parameters": "-",
        }
        tuning = tuning_of.get(name)
        if name not in tuning_of:
            row["tuning"] = "as each run was configured (not from a comparison)"
        elif not tuning and own.get(name):  # an arms file's settings, e.g. carried over from a sweep
            row.update({"tuning": "the arms file's settings", "parameters": own[name]})
        elif tuning:
            kind, amount = tuning["budget"]
            best = tuning["best"].get(name, {})
            params = sorted(best.get("params", {}).items())
            row.update(
                {
                    "tuning": f"{tuning['trials_per_arm']} trials x {kind}={amount:g}",
                    "tuned on": f"seeds {', '.join(map(str, tuning['seeds']))}; {tuning['sweep']}",
                    "best trial": best.get("trial", "-"),
                    "objective": f"{tuning['objective']} = {best['value']:.4g}" if "value" in best else "-",
                    "parameters": ", ".join(
                        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in params
                    ),
                }
            )
        rows.append(row)
    return pd.DataFrame(rows)


def _own_settings(arm: dict) -> str:
    """An arm's own settings in its spec (an arms file's `algo_args` and `set`), as `key=value`s."""
    values = {f"algo.{k}": v for k, v in (arm.get("algo_args") or {}).items()} | dict(
        arm.get("run_args") or {}
    )
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(values.items())
    )


_COUNT, _SCIENTIFIC, _PERCENT, _TENTHS = "{:,.0f}", "{:.3g}", "{:.0%}", "{:,.1f}"
"""Number formats of the budget table: counts, FLOPs, shares, seconds per step and GiB."""


def _mean_range(values, fmt: str = _COUNT) -> str:
    """mean [min, max] of `values` in `fmt` ("-" for none; the mean alone where all are equal)."""
    if len(values) == 0:
        return "-"
    lo, hi = float(np.min(values)), float(np.max(values))
    return fmt.format(float(np.mean(values))) + ("" if lo == hi else f" [{fmt.format(lo)}, {fmt.format(hi)}]")


def runs_table(comparison: Comparison) -> pd.DataFrame:
    """Every run: state, how it ended and what stopped it (as the run recorded them), whether
    and at which step it collapsed (`results.collapse`), steps, trajectories, tokens,
    model FLOPs, wall time, the evaluated checkpoint, and the reason of a failure or stop."""
    columns = [
        "run",
        "arm",
        "seed",
        "state",
        "outcome",
        "stopped_by",
        "collapsed",
        "collapse_step",
        "steps",
        "trajectories",
        "generated_tokens",
        "flops",
        "elapsed_s",
        "selected",
        "detail",
    ]
    runs = comparison.runs.reindex(columns=columns)
    return runs.assign(elapsed_s=pd.to_numeric(runs["elapsed_s"], errors="coerce").round(1))


def paper_tables(scores: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The paper's table layouts: its rows and numbers, beside this harness's mean score (%)
    of the arm each row maps to on every benchmark the comparison evaluated. Only tables with
    at least two of their rows among the comparison's arms: a paper table compares its rows, and
    one arm alone (SAO is in every table) would only repeat the scores table. A table shows the
    benchmarks of its kind only (`paper.is_swe_benchmark`): Table 2 the SWE ones, the others the
    rest."""
    out = []
    harness = {(r.arm, r.benchmark): 100 * r.mean for r in scores.itertuples()} if len(scores) else {}
    evaluated = list(dict.fromkeys(scores["benchmark"])) if len(scores) else []
    for spec in TABLES.values():
        benches = [b for b in evaluated if is_swe_benchmark(b) == spec.get("swe", False)]
        arms = [arm for arm, _ in spec["rows"].values()]
        if sum(any((arm, b) in harness for b in benches) for arm in arms) < 2:
            continue
        rows = []
        for label, (arm, numbers) in spec["rows"].items():
            row = {"row": label, "arm here": arm}
            row.update({f"{col} ({PAPER_SCALE})": v for col, v in zip(spec["columns"], numbers)})
            for b in benches:
                value = harness.get((arm, b))
                row[f"{BENCHMARK_COLUMNS.get(b, b)} (this harness)"] = (
                    "-" if value is None else f"{value:.1f}"
                )
            rows.append(row)
        out.append((spec["title"], pd.DataFrame(rows)))
    return out


def headline(scores: pd.DataFrame, diffs: pd.DataFrame) -> pd.DataFrame:
    """The terminal's comparison table: score [CI] (%) per arm and benchmark, and the
    difference to the baseline with its CI, p-value and verdict."""
    rows = []
    for r in scores.itertuples():
        row = {
            "arm": r.arm,
            "benchmark": r.benchmark,
            "seeds": str(r.n_seeds),
            "score % [95% CI]": f"{100 * r.mean:.1f} [{100 * r.ci_low:.1f}, {100 * r.ci_high:.1f}]",
        }
        match = diffs[(diffs["arm"] == r.arm) & (diffs["benchmark"] == r.benchmark)] if len(diffs) else diffs
        if len(match):
            d = match.iloc[0]
            row["vs " + d["baseline"]] = (
                f"{100 * d['diff']:+.1f} [{100 * d['ci_low']:+.1f}, {100 * d['ci_high']:+.1f}]"
            )
            row["p"] = format_p(d["p_value"], d.get("n_boot"))
            row["verdict"] = d["verdict"]
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def _in_arm_order(df: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """Rows sorted by the comparison's arm order (stable within an arm)."""
    if df.empty:
        return df
    order = {arm: i for i, arm in enumerate(arms)}
    return df.sort_values("arm", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
