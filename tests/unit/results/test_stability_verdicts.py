"""The stability claims' rows (`results.report.stability_verdicts`) on hand-made runs tables: not
run, no collapse anywhere, 3 vs 3 runs (never shown: the exact test cannot go below 0.1), and 4 vs
4 runs in both directions; and the rows reach VERDICTS.md and README.md."""

from __future__ import annotations

import json
from html import escape

import pandas as pd
import pytest

from results.report.findings import Finding
from results.report.stability_verdicts import assess_stability, stability_rows
from results.report.verdicts import write_verdicts


def _stability(root, runs: dict[str, list[int | None]], longest: int = 1000) -> None:
    """A stability reference: per arm one entry per run, its collapse step or None (survived)."""
    rows = []
    for arm, steps in runs.items():
        for seed, step in enumerate(steps):
            rows.append(
                {
                    "run": f"{arm}-s{seed}",
                    "arm": arm,
                    "seed": seed,
                    "collapsed": step is not None,
                    "collapse_step": step,
                    "steps": longest,
                }
            )
    tables = root / "stability" / "tables"
    tables.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(tables / "runs.csv", index=False)
    spec = {"budget": {"kind": "trajectories", "amount": 64000}, "arms": [{"name": a} for a in runs]}
    (root / "stability" / "provenance.json").write_text(json.dumps({"specs": [spec]}))


def _by_claim(root):
    return {v.claim.label: v for v in assess_stability(root)}


GRPO_CLAIM = "SAO trains stably where vanilla GRPO collapses"
DIS_CLAIM = "GRPO+DIS trains stably where vanilla GRPO collapses"
VAPO_CLAIM = "SAO trains stably where vanilla VAPO collapses"


def test_without_the_reference_every_row_is_not_run(tmp_path):
    assert all(v.finding == Finding.NOT_RUN for v in assess_stability(tmp_path))
    assert all(r["here"] == "-" and r["verdict"] == "not run yet" for r in stability_rows(tmp_path))


def test_three_seeds_show_no_direction_even_when_every_grpo_run_collapses(tmp_path):
    _stability(
        tmp_path,
        {
            "sao": [None, None, None],
            "grpo:clip-higher": [120, 160, 300],
            "grpo+dis": [None, None, None],
            "ppo:vapo": [None, None, None],
        },
    )
    v = _by_claim(tmp_path)
    assert v[GRPO_CLAIM].finding == Finding.NOT_SHOWN and v[GRPO_CLAIM].p == pytest.approx(0.1)
    assert (
        v[GRPO_CLAIM].text().endswith("(exploratory; exact log-rank p = 0.1, at best 0.1 with 3 vs 3 runs)")
    )
    assert v[VAPO_CLAIM].finding == Finding.NOT_SHOWN and v[VAPO_CLAIM].p == 1.0  # nothing collapsed
    row = {r["claim"]: r for r in stability_rows(tmp_path)}[GRPO_CLAIM]
    assert row["here"] == (
        "sao 0/3 collapsed (median > 1000) vs grpo:clip-higher 3/3 collapsed (median 160; at 120, 160, 300)"
    )
    assert row["budget"] == "trajectories=64000, shared defaults"
    assert row["figure"] == "[stability_survival.png](stability/figures/stability_survival.png)"


def test_four_seeds_show_the_direction_either_way(tmp_path):
    _stability(
        tmp_path,
        {
            "sao": [None, None, None, None],
            "grpo:clip-higher": [90, 160, 200, 400],
            "grpo+dis": [100, 150, 180, 210],  # the claim's arm collapses: the opposite direction
            "ppo:vapo": [None, 95, None, None],
        },
    )
    v = _by_claim(tmp_path)
    assert v[GRPO_CLAIM].finding == Finding.SAME and v[GRPO_CLAIM].p == pytest.approx(2 / 70)
    assert v[DIS_CLAIM].finding == Finding.NOT_SHOWN  # both arms collapse throughout: p well above 0.05
    assert v[VAPO_CLAIM].finding == Finding.NOT_SHOWN and v[VAPO_CLAIM].p == 1.0  # one collapse
    _stability(tmp_path / "b", {"sao": [80, 90, 100, 110], "grpo:clip-higher": [None] * 4})
    assert _by_claim(tmp_path / "b")[GRPO_CLAIM].finding == Finding.OPPOSITE


def test_the_rows_reach_verdicts_md_and_the_readme(tmp_path):
    _stability(tmp_path, {"sao": [None] * 4, "grpo:clip-higher": [90, 160, 200, 400]})
    readme = tmp_path / "README.md"
    readme.write_text("before\n<!-- verdicts:start -->\n<!-- verdicts:end -->\nafter\n")
    text = write_verdicts(tmp_path, readme).read_text()
    assert "## Stability under the off-policy regime (exploratory)" in text
    assert f"| {GRPO_CLAIM} | GRPO collapses near step 160; SAO stable for 1,000 steps |" in text
    block = readme.read_text()
    assert f"| {GRPO_CLAIM} | sao 0/4 collapsed (median > 1000) vs grpo:clip-higher 4/4" in block
    assert "same direction, at toy scale (exploratory; exact log-rank p = 0.029" in block


def test_a_report_with_both_arms_of_a_stability_claim_states_it_in_its_bottom_line(tmp_path):
    from results.report import write_report
    from results.report.stability_verdicts import stability_sentences

    from .synthetic_runs import write_comparison

    out = write_comparison(tmp_path / "cmp", arms=("sao", "grpo:clip-higher"), seeds=(0, 1), steps=60)
    paths = write_report([out], tmp_path / "report", n_boot=200)
    runs = pd.read_csv(tmp_path / "report" / "tables" / "runs.csv")
    ((label, words),) = stability_sentences(runs)  # the one claim whose two arms ran here
    assert label == GRPO_CLAIM and words.startswith("sao 0/2 collapsed (median > 60) vs grpo:clip-higher")
    text = paths.index_html.read_text()
    assert f"{GRPO_CLAIM}:</span> {escape(words)}" in text and "at best 0.33 with 2 vs 2 runs" in text
