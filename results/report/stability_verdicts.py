"""The paper's stability claims (`results.report.claims.STABILITY_CLAIMS`) against the stability
reference: per claim, each arm's runs collapsed and median steps to collapse under the rule fixed
in `results.collapse` before the runs, and the exact log-rank p of the two arms' survival.

The rule of a row (exploratory: these claims were not in the declared family):
- "not run yet" where the reference or either arm's runs are missing;
- where no run of either arm collapsed there is nothing to tell the arms apart: no direction
  shown (the paper's collapse did not happen here);
- otherwise a direction is shown only where the exact permutation p of the log-rank statistic
  (`results.collapse.logrank_exact_p`, two-sided) is at most 0.05: "same direction" where the
  claim's arm collapsed later or less often, "opposite direction" otherwise. With n vs m runs the
  test cannot go below 1 / C(n + m, n), twice that for n = m (3 vs 3: 0.1; 5 vs 5: 0.008), so the
  row says how low it could have gone (`results.collapse.smallest_exact_p`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from results.collapse import (
    TimeToCollapse,
    logrank_exact_p,
    logrank_statistic,
    median_steps_to_collapse,
    smallest_exact_p,
)
from results.report.claims import STABILITY_CLAIMS, Claim
from results.report.evidence import budget_and_tuning
from results.report.findings import Finding

ALPHA = 0.05


@dataclass(frozen=True)
class StabilityVerdict:
    """One stability claim's assessment."""

    claim: Claim
    times: tuple[list[TimeToCollapse], list[TimeToCollapse]] | None  # (arm's runs, other's runs)
    budget: str
    p: float  # exact two-sided log-rank p; NaN when not run
    finding: Finding

    def text(self) -> str:
        """The finding with its p and the smallest p these runs could have given."""
        if self.times is None:
            return str(self.finding)
        n_a, n_b = len(self.times[0]), len(self.times[1])
        best = smallest_exact_p(n_a, n_b)
        return f"{self.finding} (exploratory; exact log-rank p = {self.p:.2g}, at best {best:.2g} with {n_a} vs {n_b} runs)"


def run_times(runs: pd.DataFrame, arm: str) -> list[TimeToCollapse]:
    """An arm's runs that trained, from a report's runs table: the collapse step, or the last
    step censored (as `results.report.stability.times_by_arm` reads a comparison)."""
    if runs.empty or "collapsed" not in runs:
        return []
    group = runs[(runs["arm"] == arm) & (pd.to_numeric(runs["steps"], errors="coerce") > 0)]
    return [
        TimeToCollapse(int(r.collapse_step), True)
        if _true(r.collapsed)
        else TimeToCollapse(int(r.steps), False)
        for r in group.itertuples()
    ]


def _true(value) -> bool:
    return str(value).strip().lower() == "true"


def judge_stability(
    claim: Claim, a: list[TimeToCollapse], b: list[TimeToCollapse], budget: str
) -> StabilityVerdict:
    """A claim's verdict from its two arms' times to collapse (module docstring)."""
    if not a or not b:
        return StabilityVerdict(claim, None, budget, float("nan"), Finding.NOT_RUN)
    p = logrank_exact_p(a, b)
    if not any(t.collapsed for t in (*a, *b)) or p > ALPHA:
        return StabilityVerdict(claim, (a, b), budget, p, Finding.NOT_SHOWN)
    finding = Finding.SAME if logrank_statistic(a, b) > 0 else Finding.OPPOSITE
    return StabilityVerdict(claim, (a, b), budget, p, finding)


def assess_stability(root: Path) -> list[StabilityVerdict]:
    """Every stability claim's verdict from the committed reference under `root`."""
    verdicts = []
    for claim in STABILITY_CLAIMS:
        ref = root / claim.reference
        runs = _read(ref / "tables" / "runs.csv")
        budget = budget_and_tuning(ref / "provenance.json", (claim.arm, claim.other)) if len(runs) else "-"
        verdicts.append(
            judge_stability(claim, run_times(runs, claim.arm), run_times(runs, claim.other), budget)
        )
    return verdicts


def _read(path: Path) -> pd.DataFrame:
    return pd.read_csv(path) if path.exists() else pd.DataFrame()


def _arm_text(arm: str, times: list[TimeToCollapse]) -> str:
    collapsed = sorted(t.steps for t in times if t.collapsed)
    at = f"; at {', '.join(map(str, collapsed))}" if collapsed else ""
    return f"{arm} {len(collapsed)}/{len(times)} collapsed (median {median_steps_to_collapse(times)}{at})"


def stability_sentences(runs: pd.DataFrame) -> list[tuple[str, str]]:
    """(label, sentence) of every stability claim whose two arms have runs in `runs` (a report's
    runs table): a report's bottom line, judged as the verdict table judges its reference."""
    out = []
    for claim in STABILITY_CLAIMS:
        a, b = run_times(runs, claim.arm), run_times(runs, claim.other)
        if a and b:
            v = judge_stability(claim, a, b, "-")
            out.append(
                (claim.label, f"{_arm_text(claim.arm, a)} vs {_arm_text(claim.other, b)}: {v.text()}.")
            )
    return out


def stability_rows(root: Path, link_prefix: str = "", compact: bool = False) -> list[dict[str, str]]:
    """The stability table: one row per claim (VERDICTS.md's, or README's compact one)."""
    rows = []
    for v in assess_stability(root):
        claim = v.claim
        here = (
            "-"
            if v.times is None
            else f"{_arm_text(claim.arm, v.times[0])} vs {_arm_text(claim.other, v.times[1])}"
        )
        figure = (
            "-"
            if v.times is None
            else f"[{claim.figure}]({link_prefix}{claim.reference}/figures/{claim.figure})"
        )
        if compact:
            rows.append({"claim": claim.label, "here": here, "verdict": v.text(), "figure": figure})
        else:
            paper = claim.paper or "-"
            rows.append(
                {
                    "claim": claim.label,
                    "paper": paper,
                    "here": here,
                    "budget": v.budget,
                    "verdict": v.text(),
                    "figure": figure,
                }
            )
    return rows
