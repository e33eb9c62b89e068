"""Scores of an evaluation from its records: each problem's score, avg@k, pass@k, confidence
intervals, per-group breakdowns, and the flat `eval/<benchmark>/` metrics of a training run.

`correct_by_problem` is the one reader of per-problem results: summaries, sweeps' objectives
and pruners, reports and `python -m results.compare` all score problems through it.

Pure functions of the records (and the problems' meta values), so an evaluation's summary can
be recomputed from its `<bench>.jsonl` file without the runtime (`results/` does, for reports).

avg@k is the mean over problems of the fraction of the problem's k samples that are correct (the
per-problem Pass@1 estimate; the paper's metric, "mean of k runs"); pass@1 and pass@k use the
unbiased estimator. The normal-approximation CI and the bootstrap CI are over problems
(per-problem Pass@1).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from benchmarks import stats
from benchmarks.base import BenchmarkSpec
from envs.base import Problem

FALLBACK_PREFIX = "fallback"
"""Grader methods starting with this are string fallbacks (`envs.math.graders`)."""


def _finite(x: float) -> float | None:
    """x, or None when it is NaN or infinite (so the summary is strict JSON)."""
    return x if math.isfinite(x) else None


def _pass_rate_ci95(pass1: Sequence[float]) -> tuple[float | None, list[float | None]]:
    """(standard error, normal 95% CI clipped to [0, 1]) of a mean pass rate; None where undefined."""
    normal = stats.mean_stderr_ci(pass1, bounds=(0.0, 1.0))
    return _finite(normal["stderr"]), [_finite(normal["ci_low"]), _finite(normal["ci_high"])]


def correct_by_problem(records: Iterable[Mapping[str, Any]]) -> dict[str, list[bool]]:
    """Each problem's samples' correctness, problems in the order the records first name them."""
    by_problem: dict[str, list[bool]] = {}
    for r in records:
        by_problem.setdefault(str(r["problem_id"]), []).append(bool(r["correct"]))
    return by_problem


def problem_scores(records: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Each problem's score, the fraction of its samples that are correct (its Pass@1 estimate;
    avg@k is their mean), problems in the order the records first name them."""
    return {problem: sum(c) / len(c) for problem, c in correct_by_problem(records).items()}


def summarize(
    records: Sequence[Mapping[str, Any]],
    spec: BenchmarkSpec,
    k: int,
    provenance: Mapping[str, Any],
    seed: int = 0,
    wall_seconds: float | None = None,
    problems: Sequence[Problem] = (),
) -> dict[str, Any]:
    """The summary of an eval from its records (every problem must have exactly `k` samples);
    with `spec.breakdown` set, `problems` supply the meta values avg@k is split by."""
    by_problem = correct_by_problem(records)
    if any(len(v) != k for v in by_problem.values()):
        raise ValueError(f"summarize: every problem needs {k} samples")
    correct = list(by_problem.values())
    pass1 = stats.per_problem_pass1(correct)
    stderr, ci95 = _pass_rate_ci95(pass1)
    boot = stats.bootstrap_ci(pass1, seed=seed)
    ks = sorted({1, k})
    pass_at = {
        str(kk): float(sum(stats.pass_at_k(k, sum(c), kk) for c in correct) / len(correct)) for kk in ks
    }
    methods = Counter(r["grader_method"] for r in records)
    tokens = [int(r["tokens"]) for r in records]
    return {
        "benchmark": spec.name,
        "version": spec.version,
        "n_problems": len(correct),
        "k": k,
        "n_samples": len(records),
        "n_correct": int(sum(map(sum, correct))),
        "avg_at_k": stats.avg_at_k(correct),
        "pass_at_k": pass_at,
        "stderr": stderr,
        "ci95": ci95,
        "bootstrap_ci95": [boot["ci_low"], boot["ci_high"]],
        "grader_methods": dict(sorted(methods.items())),
        "n_string_fallback": sum(n for m, n in methods.items() if m.startswith(FALLBACK_PREFIX)),
        "finish_reasons": dict(sorted(Counter(r["finish_reason"] for r in records).items())),
        "mean_tokens": sum(tokens) / len(tokens),
        "total_tokens": sum(tokens),
        "wall_seconds": wall_seconds,
        **({"breakdown": breakdown(by_problem, spec.breakdown, problems)} if spec.breakdown else {}),
        "provenance": dict(provenance),
    }


def breakdown(by_problem: Mapping[str, list[bool]], key: str, problems: Sequence[Problem]) -> dict[str, Any]:
    """avg@k, its 95% CI and the number of problems per value of `problem.meta[key]` (values
    in ascending order; problems without the key are grouped under "none"), so a score can be
    read per difficulty or category: where a model improves, not only by how much."""
    value_of = {p.key: p.meta.get(key) for p in problems}
    groups: dict[Any, list[list[bool]]] = {}
    for problem_id, correct in by_problem.items():
        groups.setdefault(value_of.get(problem_id), []).append(correct)

    def order(value: Any) -> tuple[int, Any]:
        return (0, value) if isinstance(value, int | float) else (1, str(value))

    out = {}
    for value in sorted(groups, key=order):
        out["none" if value is None else str(value)] = {
            "n_problems": len(groups[value]),
            "avg_at_k": stats.avg_at_k(groups[value]),
            "ci95": _pass_rate_ci95(stats.per_problem_pass1(groups[value]))[1],
        }
    return {"key": key, "groups": out}


def eval_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    """Flat metrics of a summary under the `eval/<benchmark>/` namespace (for metrics.jsonl),
    with avg@k per breakdown value as `eval/<benchmark>/<key>=<value>/avg_at_k`."""
    ns = f"eval/{summary['benchmark']}/"
    k = summary["k"]
    return {
        ns + "avg_at_k": summary["avg_at_k"],
        ns + "pass_at_1": summary["pass_at_k"]["1"],
        ns + f"pass_at_{k}": summary["pass_at_k"][str(k)],
        ns + "ci95_low": summary["ci95"][0],
        ns + "ci95_high": summary["ci95"][1],
        ns + "mean_tokens": summary["mean_tokens"],
        **{
            f"{ns}{summary['breakdown']['key']}={value}/avg_at_k": group["avg_at_k"]
            for value, group in summary.get("breakdown", {}).get("groups", {}).items()
        },
    }
