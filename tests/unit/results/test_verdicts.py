"""VERDICTS.md from reference comparisons' tables: verdicts by the difference's CI, missing
comparisons as "not run yet", README's block kept identical to the generated table."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from results.report.verdicts import (
    CLAIMS,
    README_END,
    README_START,
    verdict_rows,
    verdicts_markdown,
    write_verdicts,
)

REPO = Path(__file__).resolve().parents[3]


def _reference(root: Path, name: str, scores: dict, diffs: list[tuple]) -> None:
    tables = root / name / "tables"
    tables.mkdir(parents=True)
    pd.DataFrame(
        [
            {"arm": a, "benchmark": b, "mean": m, "ci_low": m - 0.05, "ci_high": m + 0.05, "n_seeds": 3}
            for (a, b), m in scores.items()
        ]
    ).to_csv(tables / "scores.csv", index=False)
    pd.DataFrame(
        [
            {
                "arm": a,
                "baseline": o,
                "benchmark": b,
                "diff": d,
                "ci_low": lo,
                "ci_high": hi,
                "p_value": p,
                "n_seeds": 3,
            }
            for a, o, b, d, lo, hi, p in diffs
        ]
    ).to_csv(tables / "differences.csv", index=False)
    spec = {"budget": {"kind": "trajectories", "amount": 640}, "tuning": {"trials_per_arm": 20}}
    (root / name / "provenance.json").write_text(json.dumps({"specs": [spec]}))


def test_verdicts_follow_the_confidence_interval(tmp_path):
    _reference(
        tmp_path,
        "arith",
        {("sao", "arith"): 0.7, ("grpo", "arith"): 0.5, ("grpo+dis", "arith"): 0.69},
        [
            ("sao", "grpo", "arith", 0.2, 0.1, 0.3, 0.001),  # above 0
            ("grpo+dis", "grpo", "arith", -0.1, -0.2, -0.01, 0.02),  # below 0
            ("sao", "grpo+dis", "arith", 0.01, -0.03, 0.05, 0.6),
        ],
    )
    rows = {r["claim"]: r for r in verdict_rows(tmp_path)}
    assert len(rows) == len(CLAIMS)
    sao_grpo = rows["Table 1: SAO > GRPO (math)"]
    assert sao_grpo["verdict"] == "reproduces" and sao_grpo["difference [95% CI]"] == "+20.0 [+10.0, +30.0]"
    assert sao_grpo["here"] == "70.0 [65.0, 75.0] vs 50.0 [45.0, 55.0] (arith)"
    assert sao_grpo["paper"] == "97.3 vs 84.2 (AIME2025)" and sao_grpo["seeds"] == "3"
    assert sao_grpo["budget, tuning"] == "trajectories=640, tuned: 20 trials/arm"
    assert rows["Table 1: GRPO+DIS > GRPO (math)"]["verdict"] == "does not reproduce"
    assert rows["Table 1: SAO > GRPO+DIS (math)"]["verdict"] == "inconclusive at this scale"
    assert rows["Table 1: SAO > SAO w/ DIS only (math)"]["verdict"] == "not run yet"  # arm missing
    assert rows["Table 2: SAO > GRPO+DIS (SWE)"]["verdict"] == "not run yet"  # comparison missing


def test_a_figure_claim_without_paper_numbers_gives_the_papers_words_and_a_verdict(tmp_path):
    _reference(
        tmp_path,
        "drift",
        {("sao", "drift-recovery"): 0.6, ("running-mean", "drift-recovery"): 0.4},
        [("sao", "running-mean", "drift-recovery", 0.2, 0.05, 0.35, 0.01)],
    )
    row = next(r for r in verdict_rows(tmp_path) if r["claim"].startswith("Fig. 5"))
    assert row["paper"] == "after each shift (no numbers)" and row["verdict"] == "reproduces"
    assert row["here"] == "60.0 [55.0, 65.0] vs 40.0 [35.0, 45.0] (drift-recovery)"
    assert row["figure"] == "[fig5b_drift_label_share.png](drift/figures/fig5b_drift_label_share.png)"


def test_write_verdicts_fills_the_readme_block_with_links_from_the_readme(tmp_path):
    root = tmp_path / "results" / "reference"
    _reference(
        root,
        "arith",
        {("sao", "arith"): 0.7, ("grpo", "arith"): 0.5},
        [("sao", "grpo", "arith", 0.2, 0.1, 0.3, 0.001)],
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{README_START}\nold\n{README_END}\n\nafter\n")
    path = write_verdicts(root, readme)
    assert "](arith/figures/fig1_final_scores.png)" in path.read_text()
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{README_END}\n\nafter\n")
    assert "](results/reference/arith/figures/fig1_final_scores.png)" in text


def test_the_committed_readme_and_verdicts_match_the_reference_tables():
    root = REPO / "results" / "reference"
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(README_START) + len(README_START) : readme.index(README_END)].strip()
    assert block == verdicts_markdown(root, "results/reference/"), (
        "run: bench report --verdicts results/reference --readme README.md"
    )
    assert verdicts_markdown(root) in (root / "VERDICTS.md").read_text()
