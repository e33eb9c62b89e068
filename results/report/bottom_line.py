"""The report's bottom line: its title (task, arms, budget, seeds) and one sentence per difference
it measured, each with its interval and its verdict.

A difference that is one of the paper's claims (`results.report.claims`, matched by arms and
benchmark; the claim of this report's reference directory where several share them) is judged
exactly as the verdict table judges it (`results.report.verdicts.judge`, from the same tables
read the same way, `Reference.from_frames`): a `Finding`, with the primary claims' Holm
adjustment and their intervals at the Holm level. Any other difference (an arm against the
baseline) says what its two 95% intervals show: better, worse or not distinguishable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from results.comparison import Comparison
from results.report.claims import CLAIMS, Claim, claim_pairs
from results.report.evidence import Reference
from results.report.findings import Finding
from results.report.verdicts import Verdict, judge, verdict_text


@dataclass(frozen=True)
class Line:
    """One difference of the bottom line (a sentence and a row of the forest plot)."""

    arm: str
    other: str
    benchmark: str
    diff: float
    boot: tuple[float, float]
    """the bootstrap interval at `confidence`"""
    welch: tuple[float, float] | None
    """the seed-level interval at `confidence` (None with one seed)"""
    confidence: float
    verdict: str
    """a `Finding` with its p (claims) or better / worse / not distinguishable (other differences)"""
    shown: bool
    """whether a direction is shown (both intervals exclude 0 on one side, and Holm agrees)"""
    claim: Claim | None = None

    @property
    def primary(self) -> bool:
        """A primary claim: its intervals are at the Holm level."""
        return self.claim is not None and self.claim.primary


def claim_of(arm: str, other: str, benchmark: str, report: str) -> Claim | None:
    """The paper's claim about `arm` vs `other` on `benchmark` (that of the reference directory
    named `report` where several references test it), or None."""
    found = [c for c in CLAIMS if (c.arm, c.other, c.benchmark) == (arm, other, benchmark)]
    return next((c for c in found if c.reference == report), found[0] if found else None)


def bottom_lines(
    diffs: pd.DataFrame,
    scores: pd.DataFrame,
    per_seed: pd.DataFrame,
    matrices: dict,
    report: str,
    reference: Reference | None = None,
) -> list[Line]:
    """One `Line` per row of the differences table (module docstring), less a row whose mirror
    says it (a claim's row, or the same two arms in the paper's order: `_mirrored`); `report`:
    the name of the report's directory (a reference's name makes its claims the verdict
    table's); `reference`: the reference its claims are judged in (default: these tables; a reference in parts: all of them,
    `refresh_reference_pages`), whose claims between arms of different parts follow the rows."""
    if diffs.empty:
        return []
    rows = list(diffs.itertuples(index=False))
    claims = [claim_of(r.arm, r.baseline, r.benchmark, report) for r in rows]
    judged = [i for i, c in enumerate(claims) if c is not None]
    reference = reference or Reference.from_frames(scores, diffs, per_seed, matrices)
    claimed = [claims[i] for i in judged]
    # the reference's claims not among these rows share the Holm family, as in the verdict table
    # (without evidence they enter as not run, as there)
    family = claimed + [c for c in CLAIMS if c.reference == report and c not in claimed]
    unstated = ["-"] * len(family)  # the report states budget and compute in its own tables
    verdicts = judge(family, [reference.evidence(c) for c in family], unstated, unstated)
    by_claim = dict(zip(family, verdicts))
    said = {(c.other, c.arm, c.benchmark) for c in claimed}
    keys, ordered = [(r.arm, r.baseline, r.benchmark) for r in rows], claim_pairs()
    lines = []
    for i, (r, claim) in enumerate(zip(rows, claims)):
        if claim is None and (keys[i] in said or _mirrored(keys, i, ordered)):
            continue  # the mirror of a claim's row, or of a row said in the paper's order
        v = by_claim.get(claim)
        if v is not None and v.boot is not None:
            lines.append(_claim_line(v))
            continue
        welch = None if math.isnan(r.welch_low) else (r.welch_low, r.welch_high)
        shown = r.verdict != "not distinguishable"
        lines.append(
            Line(r.arm, r.baseline, r.benchmark, r.diff, (r.ci_low, r.ci_high), welch, 0.95, r.verdict, shown)
        )
    # claims across a reference's parts: judged in the joined reference, in no row of these tables
    return lines + [_claim_line(v) for v in verdicts[len(claimed) :] if v.boot is not None]


def _mirrored(keys: list[tuple[str, str, str]], i: int, pairs: set[tuple[str, str]]) -> bool:
    """Whether row `i` (arm, other, benchmark) is said by its mirror among `keys`: the mirror is
    in the paper's order (`pairs`, the claims' (arm, other): sao - grpo, not grpo - sao), or
    neither is and the mirror comes first."""
    arm, other, bench = keys[i]
    if (other, arm, bench) not in keys:
        return False
    if (arm, other) in pairs:
        return False
    return (other, arm) in pairs or keys.index((other, arm, bench)) < i


def _claim_line(v: Verdict) -> Line:
    """The line of a judged claim: its difference, its intervals at its level and its verdict."""
    c = v.claim
    shown = v.finding in (Finding.SAME, Finding.OPPOSITE)
    return Line(
        c.arm, c.other, c.benchmark, v.evidence.diff, v.boot, v.welch, 1 - v.level, verdict_text(v), shown, c
    )


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _interval(iv: tuple[float, float]) -> str:
    return f"[{_pts(iv[0])}, {_pts(iv[1])}]"


def sentence(line: Line) -> tuple[str, str]:
    """(label, sentence) of one line: "SAO > GRPO (math)", "sao - grpo on arith: +13.4 points of %
    (bootstrap 95% CI [+7.1, +19.0]; seed-level [+5.0, +21.0]): same direction, at toy scale
    (exploratory)."""
    label = line.claim.label if line.claim is not None else f"{line.arm} vs {line.other}"
    level = f"{100 * line.confidence:.4g}%"
    intervals = f"bootstrap {level} CI {_interval(line.boot)}"
    intervals += (
        f"; seed-level {_interval(line.welch)}" if line.welch else "; one seed: no seed-level interval"
    )
    verdict = line.verdict
    if line.claim is None:
        verdict = {
            "better": f"{line.arm} better (both 95% intervals above 0)",
            "worse": f"{line.arm} worse (both 95% intervals below 0)",
        }.get(verdict, "not distinguishable (an interval contains 0)")
    text = f"{line.arm} \u2212 {line.other} on {line.benchmark}: {_pts(line.diff)} points of % ({intervals}): {verdict}."
    return label, text


def report_title(comparison: Comparison) -> str:
    """A title naming the task(s), the arms, the budget and the seeds of the report's runs."""
    runs = comparison.runs
    if runs.empty:
        return "Report"
    tasks = sorted({s.get("task") for s in comparison.specs if s.get("task")} | _run_tasks(comparison))
    arms = comparison.arms
    per_arm = runs.groupby("arm")["seed"].nunique()
    lo, hi = int(per_arm.min()), int(per_arm.max())
    seeds = f"{lo} seed{'s' if hi > 1 else ''}" if lo == hi else f"{lo}-{hi} seeds"
    task = ", ".join(tasks) or "runs"
    if len(runs) == 1:
        return f"{task}: {arms[0]}, run {runs['run'].iloc[0]} at {budget_text(comparison)}"
    return f"{task}: {', '.join(arms)} at {budget_text(comparison)} ({seeds} per arm)"


def _run_tasks(comparison: Comparison) -> set[str]:
    """The tasks of plain run directories (their config.json), none for comparison runs."""
    if comparison.specs or "task" not in comparison.runs:
        return set()
    return {t for t in comparison.runs["task"].dropna()}


def budget_text(comparison: Comparison) -> str:
    """'trajectories=32000' (a comparison's matched budget), or the budgets the runs were
    configured with (plain runs: every limit of the budget table their configs set)."""
    budgets = {f"{s['budget']['kind']}={s['budget']['amount']}" for s in comparison.specs if "budget" in s}
    if not budgets and "budget" in comparison.runs:
        budgets = set(comparison.runs["budget"].dropna())
    return ", ".join(sorted(budgets)) if budgets else "the budget each run was configured with"
