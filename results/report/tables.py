"""The comparison's tables, computed from run directories only (nothing typed by hand):

- scores: per arm and benchmark, the mean avg@k over seeds with a 95% CI from a two-level
  bootstrap over training seeds and problems (`benchmarks.run_stats`), n problems x k samples;
- per-seed scores, every run kept (failed and stopped ones included, marked);
- paired differences against a baseline arm, paired by (seed, problem): difference, 95% CI,
  p-value and a verdict (better / worse / not distinguishable at 95%), with the probability
  of improvement across seeds;
- aggregate: interquartile mean across seeds and benchmarks (rliable), with its CI;
- budget and consumption per arm; every run's outcome;
- the paper's table layouts with this harness's numbers beside the paper's.

A score cell is one (seed, problem): the fraction of that problem's k samples that are correct.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.run_stats import (
    iqm_ci,
    paired_difference,
    probability_of_improvement_ci,
    stratified_bootstrap_ci,
)
from results.comparison import Comparison
from results.report.paper import BENCHMARK_COLUMNS, PAPER_SCALE, TABLES


def score_matrices(comparison: Comparison) -> dict[tuple[str, str], pd.DataFrame]:
    """(arm, benchmark) -> a seeds x problems frame of per-problem scores (fraction correct)."""
    scores = comparison.scores
    if scores.empty:
        return {}
    cells = scores.groupby(["arm", "benchmark", "seed", "problem_id"], sort=True)["score"].mean()
    return {
        (arm, bench): group.droplevel(["arm", "benchmark"]).unstack("problem_id")
        for (arm, bench), group in cells.groupby(level=["arm", "benchmark"])
    }


def final_scores(comparison: Comparison, matrices: dict, n_boot: int = 10000) -> pd.DataFrame:
    """Mean and 95% CI of every arm on every benchmark (columns: arm, benchmark, mean,
    ci_low, ci_high, n_seeds, n_problems, k)."""
    k = comparison.summaries.groupby(["arm", "benchmark"])["k"].max() if len(comparison.summaries) else {}
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
                "k": int(k[(arm, bench)]) if (arm, bench) in k else None,
            }
        )
    return _in_arm_order(pd.DataFrame(rows), comparison)


def per_seed_scores(comparison: Comparison) -> pd.DataFrame:
    """avg@k of every run on every benchmark, with the run's state (columns: arm, seed,
    benchmark, avg_at_k, state)."""
    runs = comparison.runs[["run", "arm", "seed", "state"]]
    if comparison.summaries.empty:
        return runs.assign(benchmark=None, avg_at_k=None)
    scores = comparison.summaries[["run", "benchmark", "avg_at_k"]]
    table = runs.merge(scores, on="run", how="left")[["arm", "seed", "benchmark", "avg_at_k", "state"]]
    return _in_arm_order(table, comparison)


def differences(
    comparison: Comparison, matrices: dict, baseline: str, n_boot: int = 10000, pairs=()
) -> pd.DataFrame:
    """Each arm minus `baseline` on every benchmark, paired by seed and problem; then each
    (arm, other) of `pairs` whose arms are both here (the paper's claims), other as baseline."""
    wanted = [(arm, baseline) for arm in comparison.arms if arm != baseline]
    wanted += sorted(
        p for p in pairs if p[1] != baseline and p[0] in comparison.arms and p[1] in comparison.arms
    )
    benches = list(dict.fromkeys([*comparison.benchmarks, *(bench for _, bench in matrices)]))
    rows = []
    for (arm, other), bench in ((p, bench) for p in wanted for bench in benches):
        a, b = matrices.get((arm, bench)), matrices.get((other, bench))
        if a is None or b is None:
            continue
        seeds = sorted(set(a.index) & set(b.index))
        problems = sorted(set(a.dropna(axis=1).columns) & set(b.dropna(axis=1).columns))
        if not seeds or not problems:
            continue
        x, y = a.loc[seeds, problems].to_numpy(), b.loc[seeds, problems].to_numpy()
        d = paired_difference(x, y, n_boot=n_boot)
        poi = probability_of_improvement_ci(x.mean(axis=1), y.mean(axis=1), n_boot=n_boot, paired=True)
        rows.append(
            {
                "arm": arm,
                "baseline": other,
                "benchmark": bench,
                "diff": d["diff"],
                "ci_low": d["ci_low"],
                "ci_high": d["ci_high"],
                "p_value": d["p_value"],
                "verdict": d["verdict"],
                "n_seeds": len(seeds),
                "n_problems": len(problems),
                "poi": poi["poi"],
                "poi_low": poi["ci_low"],
                "poi_high": poi["ci_high"],
            }
        )
    return _in_arm_order(pd.DataFrame(rows), comparison)


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
    return _in_arm_order(pd.DataFrame(rows), comparison)


def budget_table(comparison: Comparison) -> pd.DataFrame:
    """What each arm consumed (mean over its runs, min-max in brackets) and its runs' states."""
    runs = comparison.runs
    rows = []
    for arm in comparison.arms:
        group = runs[runs["arm"] == arm]
        row = {
            "arm": arm,
            "runs": len(group),
            "states": ", ".join(f"{n} {s}" for s, n in group["state"].value_counts().items()),
        }
        for column, label in (
            ("steps", "policy steps"),
            ("trajectories", "trajectories"),
            ("generated_tokens", "generated tokens"),
            ("elapsed_s", "wall s"),
            ("critic_share", "critic share of learner time"),
        ):
            values = pd.to_numeric(group.get(column), errors="coerce").dropna() if column in group else []
            row[label] = _mean_range(values, percent=column == "critic_share")
        rows.append(row)
    return pd.DataFrame(rows)


def tuning_table(comparison: Comparison) -> pd.DataFrame:
    """How each arm's parameters were chosen: the shared defaults of its comparison, a sweep's
    best trial (`bench compare --params-from-sweep`) with the tuning budget every arm was
    given, or, for run directories given alone, as each run was configured."""
    tuning_of = {arm["name"]: spec.get("tuning") for spec in comparison.specs for arm in spec.get("arms", [])}
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


def _mean_range(values, percent: bool = False) -> str:
    if len(values) == 0:
        return "-"
    scale, fmt = (100, "{:.0f}%") if percent else (1, "{:,.0f}")
    mean, lo, hi = (scale * float(v) for v in (np.mean(values), np.min(values), np.max(values)))
    return fmt.format(mean) + ("" if lo == hi else f" [{fmt.format(lo)}, {fmt.format(hi)}]")


def runs_table(comparison: Comparison) -> pd.DataFrame:
    """Every run: state, how it ended and what stopped it (as the run recorded them), whether
    its reward collapsed (`results.comparison.reward_collapsed`), steps, trajectories, tokens,
    wall time, the evaluated checkpoint, and the reason of a failure or stop."""
    columns = [
        "run",
        "arm",
        "seed",
        "state",
        "outcome",
        "stopped_by",
        "collapsed",
        "steps",
        "trajectories",
        "generated_tokens",
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
    one arm alone (SAO is in every table) would only repeat the scores table."""
    out = []
    harness = {(r.arm, r.benchmark): 100 * r.mean for r in scores.itertuples()} if len(scores) else {}
    benches = list(dict.fromkeys(scores["benchmark"])) if len(scores) else []
    for spec in TABLES.values():
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
            row["p"] = "<0.001" if d["p_value"] < 0.001 else f"{d['p_value']:.3f}"
            row["verdict"] = d["verdict"]
        rows.append(row)
    return pd.DataFrame(rows).fillna("")


def _in_arm_order(df: pd.DataFrame, comparison: Comparison) -> pd.DataFrame:
    """Rows sorted by the comparison's arm order (stable within an arm)."""
    if df.empty:
        return df
    order = {arm: i for i, arm in enumerate(comparison.arms)}
    return df.sort_values("arm", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
