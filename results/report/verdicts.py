"""VERDICTS.md: one row per claim of the SAO paper, the paper's numbers beside this harness's.

    write_verdicts(Path("results/reference"))  ->  results/reference/VERDICTS.md

Each claim names the reference comparison that tests it (a directory under the reference
root, written by `bench report`) and the two arms it compares. Its row takes from that
directory's tables only: both arms' scores with their 95% CIs and seeds (`scores.csv`) and
their paired difference with CI and p-value (`differences.csv`, where `bench report` writes
every claim's pair it has both arms of). The verdict follows the difference's 95% CI:
reproduces (above 0), does not reproduce (below 0), inconclusive at this scale (contains 0);
"not run yet" where the reference comparison or an arm is missing.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from results.report.drift import DRIFT_SCORE
from results.report.paper import TABLES
from results.report.render import to_markdown

VERDICTS_FILE = "VERDICTS.md"
README_START, README_END = "<!-- verdicts:start -->", "<!-- verdicts:end -->"


@dataclass(frozen=True)
class Claim:
    """A paper claim: `arm` scores higher than `other` in `table`'s first column, tested by
    the reference comparison `reference` (its directory name) on its `benchmark`."""

    label: str
    table: str | None  # a key of results.report.paper.TABLES; None: a figure's claim without numbers
    arm: str
    other: str
    reference: str
    benchmark: str
    figure: str = "fig1_final_scores.png"
    paper: str | None = None  # for a claim the paper makes without numbers (table None): its words


CLAIMS = (
    Claim("Table 1: SAO > GRPO (math)", "table1", "sao", "grpo", "arith", "arith"),
    Claim("Table 1: GRPO+DIS > GRPO (math)", "table1", "grpo+dis", "grpo", "arith", "arith"),
    Claim("Table 1: SAO > GRPO+DIS (math)", "table1", "sao", "grpo+dis", "arith", "arith"),
    Claim("Table 1: SAO > SAO w/ DIS only (math)", "table1", "sao", "sao:dis-only", "arith", "arith"),
    # the same four claims with every arm at its sweep's best parameters (REPRODUCE.md, "Tuning")
    Claim("Table 1, tuned: SAO > GRPO (math)", "table1", "sao", "grpo", "arith-tuned", "arith"),
    Claim("Table 1, tuned: GRPO+DIS > GRPO (math)", "table1", "grpo+dis", "grpo", "arith-tuned", "arith"),
    Claim("Table 1, tuned: SAO > GRPO+DIS (math)", "table1", "sao", "grpo+dis", "arith-tuned", "arith"),
    Claim(
        "Table 1, tuned: SAO > SAO w/ DIS only (math)",
        "table1",
        "sao",
        "sao:dis-only",
        "arith-tuned",
        "arith",
    ),
    Claim("Table 2: SAO > GRPO+DIS (SWE)", "table2", "sao", "grpo+dis", "swe", "swe-synth"),
    Claim(
        "Table 3: K=2 > K=1 critic updates",
        "table3",
        "sao",
        "sao:single-critic-update",
        "ablations",
        "arith",
        "fig4a_critic_explained_variance.png",
    ),
    Claim(
        "Table 3: frozen attention > full-parameter critic",
        "table3",
        "sao",
        "sao:full-parameter-critic",
        "ablations",
        "arith",
        "fig4b_critic_grad_norm.png",
    ),
    Claim(
        "Table 4: SAO (DIS) > vanilla VAPO",
        "table3",
        "sao",
        "ppo:vapo",
        "ablations",
        "arith",
        "fig4c_clip_ratio.png",
    ),
    Claim("Table 4: value model > running mean", "table3", "sao", "running-mean", "ablations", "arith"),
    Claim(
        "Table 5: token-level > step-level average",
        "table5",
        "sao",
        "sao:step-average",
        "agent-granularity",
        "agent",
        "fig3_eval_vs_trajectories_agent.png",
    ),
    Claim(
        "Table 5: token-level > step-level last token",
        "table5",
        "sao",
        "sao:step-last",
        "agent-granularity",
        "agent",
        "fig3_eval_vs_trajectories_agent.png",
    ),
    Claim(
        "Fig. 5: SAO recovers faster than running mean under drift",
        None,
        "sao",
        "running-mean",
        "drift",
        DRIFT_SCORE,
        "fig5b_drift_label_share.png",
        "after each shift (no numbers)",
    ),
)
"""The paper's claims in the order the issue lists them (docs/sao.md summarises the paper)."""


def claim_pairs() -> set[tuple[str, str]]:
    """(arm, other) of every claim: the differences `bench report` adds beside its baseline's."""
    return {(c.arm, c.other) for c in CLAIMS}


def paper_number(table: str, arm: str) -> float | None:
    """The paper's first-column number of `arm`'s row in `table` (None if it has none)."""
    for row_arm, numbers in TABLES[table]["rows"].values():
        if row_arm == arm:
            return numbers[0]
    return None


def verdict_rows(root: Path, link_prefix: str = "") -> list[dict[str, str]]:
    """One row per claim from the reference comparisons under `root` (figure links relative
    to `root`, after `link_prefix`)."""
    rows, references = [], {}
    for claim in CLAIMS:
        if claim.reference not in references:  # several claims share one reference comparison
            references[claim.reference] = _read_reference(root / claim.reference)
        scores, diffs, budget_and_tuning = references[claim.reference]
        row = {
            "claim": claim.label,
            "paper": _paper_text(claim),
            "here": "-",
            "difference [95% CI]": "-",
            "p": "-",
            "seeds": "-",
            "budget, tuning": "-",
            "verdict": "not run yet",
            "figure": "-",
        }
        score_a = _score(scores, claim.arm, claim.benchmark)
        score_b = _score(scores, claim.other, claim.benchmark)
        diff = _difference(diffs, claim)
        if score_a is not None and score_b is not None and diff is not None:
            row.update(
                {
                    "here": f"{_pct(score_a)} vs {_pct(score_b)} ({claim.benchmark})",
                    "difference [95% CI]": f"{100 * diff['diff']:+.1f} [{100 * diff['ci_low']:+.1f}, "
                    f"{100 * diff['ci_high']:+.1f}]",
                    "p": f"{diff['p_value']:.3g}",
                    "seeds": str(int(diff["n_seeds"])),
                    "budget, tuning": budget_and_tuning,
                    "verdict": _verdict(diff),
                    "figure": f"[{claim.figure}]({link_prefix}{claim.reference}/figures/{claim.figure})",
                }
            )
        rows.append(row)
    return rows


def _paper_text(claim: Claim) -> str:
    """The paper's side of a claim: its two numbers in its table's first column, or its words."""
    if claim.table is None:
        return claim.paper or "-"
    a, b = paper_number(claim.table, claim.arm), paper_number(claim.table, claim.other)
    return f"{a:g} vs {b:g} ({TABLES[claim.table]['columns'][0]})"


def _read_reference(reference: Path) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """(scores, differences, "budget, tuning") of one reference comparison's report (empty
    frames where it has none)."""

    def read(name: str) -> pd.DataFrame:
        path = reference / "tables" / name
        return pd.read_csv(path) if path.exists() else pd.DataFrame()

    return read("scores.csv"), read("differences.csv"), _budget_and_tuning(reference / "provenance.json")


def _score(scores: pd.DataFrame, arm: str, benchmark: str) -> pd.Series | None:
    if scores.empty:
        return None
    hit = scores[(scores["arm"] == arm) & (scores["benchmark"] == benchmark)]
    return None if hit.empty else hit.iloc[0]


def _difference(diffs: pd.DataFrame, claim: Claim) -> pd.Series | None:
    if diffs.empty:
        return None
    hit = diffs[
        (diffs["arm"] == claim.arm)
        & (diffs["baseline"] == claim.other)
        & (diffs["benchmark"] == claim.benchmark)
    ]
    return None if hit.empty else hit.iloc[0]


def _budget_and_tuning(provenance: Path) -> str:
    """ "trajectories=32000, shared defaults" or "..., tuned: 20 trials/arm" from a report's provenance."""
    specs = json.loads(provenance.read_text()).get("specs", []) if provenance.exists() else []
    if not specs:
        return "-"
    budget = specs[0].get("budget", {})
    tuning = specs[0].get("tuning")
    tuned = f"tuned: {tuning['trials_per_arm']} trials/arm" if tuning else "shared defaults"
    return f"{budget.get('kind')}={budget.get('amount')}, {tuned}"


def _pct(score: pd.Series) -> str:
    return f"{100 * score['mean']:.1f} [{100 * score['ci_low']:.1f}, {100 * score['ci_high']:.1f}]"


def _verdict(diff: pd.Series) -> str:
    if diff["ci_low"] > 0:
        return "reproduces"
    if diff["ci_high"] < 0:
        return "does not reproduce"
    return "inconclusive at this scale"


def verdicts_markdown(root: Path, link_prefix: str = "") -> str:
    """The verdict table as Markdown (what VERDICTS.md and README.md's results section hold)."""
    return to_markdown(pd.DataFrame(verdict_rows(root, link_prefix))).rstrip("\n")


def write_verdicts(root: Path, readme: Path | None = None) -> Path:
    """Write `root`/VERDICTS.md and, with `readme`, replace the table between its verdict
    markers with the same table. Returns the VERDICTS.md path."""
    path = root / VERDICTS_FILE
    path.write_text(
        "# Verdicts: the SAO paper's claims at this harness's scale\n\n"
        "Generated by `bench report --verdicts results/reference` from the reference comparisons' tables "
        "(each listed with its command in REPRODUCE.md). Paper: its first column, at GLM/Qwen3 scale; here: "
        "mean avg@k (%) over seeds with a 95% CI; difference: paired by seed and problem, points of %.\n\n"
        f"{verdicts_markdown(root)}\n"
    )
    if readme is not None:
        text = readme.read_text()
        start, end = text.find(README_START), text.find(README_END)
        if start < 0 or end < start:
            raise ValueError(f"{readme}: no {README_START} ... {README_END} block to fill")
        prefix = os.path.relpath(root, readme.parent).replace(os.sep, "/") + "/"
        table = verdicts_markdown(root, prefix)
        readme.write_text(text[: start + len(README_START)] + "\n" + table + "\n" + text[end:])
    return path
