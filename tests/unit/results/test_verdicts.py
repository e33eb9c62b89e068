"""VERDICTS.md from reference comparisons' committed files: a direction only where both
intervals agree, Holm over the primary claims with its p and levels checked by hand, the
vocabulary of findings, the seed-spread flag, p-values at the bootstrap's floor, the compact
README table, and exact intervals from a report's score matrix."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sps

from benchmarks.multiplicity import holm
from benchmarks.run_stats import paired_difference
from results.report import write_report
from results.report.claims import CLAIMS
from results.report.findings import Finding
from results.report.html import CLAIMS_CLOSE, CLAIMS_OPEN
from results.report.reference_pages import refresh_reference_pages
from results.report.verdicts import (
    README_END,
    README_START,
    assess,
    compact_rows,
    verdict_rows,
    verdicts_markdown,
    write_verdicts,
)

from .synthetic_runs import write_comparison

REPO = Path(__file__).resolve().parents[3]


def _reference(root: Path, name: str, seeds: dict, diffs: list[tuple], k: int = 2) -> None:
    """A reference in the pre-issue-36 layout: scores, differences (bootstrap only), per-seed
    scores (`seeds`: (arm, benchmark) -> per-seed means), provenance."""
    tables = root / name / "tables"
    tables.mkdir(parents=True)
    pd.DataFrame(
        [
            {
                "arm": a,
                "benchmark": b,
                "mean": sum(s) / len(s),
                "ci_low": 0.0,
                "ci_high": 1.0,
                "n_seeds": len(s),
            }
            | {"n_problems": 200, "k": k}
            for (a, b), s in seeds.items()
        ]
    ).to_csv(tables / "scores.csv", index=False)
    pd.DataFrame(
        [
            {"arm": a, "seed": i, "benchmark": b, "avg_at_k": x, "state": "finished"}
            for (a, b), s in seeds.items()
            if b != "drift-recovery"  # as the drift reference: no per-seed drift scores
            for i, x in enumerate(s)
        ]
    ).to_csv(tables / "per_seed.csv", index=False)
    pd.DataFrame(
        [
            {"arm": a, "baseline": o, "benchmark": b, "diff": d, "ci_low": lo, "ci_high": hi, "p_value": p}
            | {"n_seeds": 3}
            for a, o, b, d, lo, hi, p in diffs
        ]
    ).to_csv(tables / "differences.csv", index=False)
    spec = {"budget": {"kind": "trajectories", "amount": 640}, "tuning": {"trials_per_arm": 20}}
    (root / name / "provenance.json").write_text(json.dumps({"specs": [spec]}))


def _by_claim(root: Path) -> dict[str, dict]:
    return {r["claim"]: r for r in verdict_rows(root)}


def test_a_direction_needs_both_intervals(tmp_path):
    _reference(
        tmp_path,
        "arith",
        {
            ("sao", "arith"): [0.70, 0.71, 0.69],
            ("grpo", "arith"): [0.50, 0.52, 0.51],
            ("grpo+dis", "arith"): [0.40, 0.70, 0.55],  # seeds far apart
            ("sao:dis-only", "arith"): [0.80, 0.81, 0.79],
        },
        [
            ("sao", "grpo", "arith", 0.19, 0.12, 0.26, 1 / 10001),  # both above 0
            ("grpo+dis", "grpo", "arith", 0.04, 0.01, 0.07, 0.02),  # bootstrap only
            ("sao", "grpo+dis", "arith", 0.15, -0.02, 0.3, 0.09),  # neither
            ("sao", "sao:dis-only", "arith", -0.10, -0.15, -0.05, 0.001),  # both below
        ],
    )
    rows = _by_claim(tmp_path)
    assert len(rows) == len(CLAIMS)
    sao_grpo = rows["Table 1: SAO > GRPO (math)"]
    assert sao_grpo["verdict"] == "same direction, at toy scale (exploratory)"
    assert sao_grpo["difference"] == "+19.0" and sao_grpo["bootstrap CI"] == "[+12.0, +26.0]†"
    welch = sps.ttest_ind([0.70, 0.71, 0.69], [0.50, 0.52, 0.51], equal_var=False)
    ci = welch.confidence_interval()
    assert sao_grpo["seed-level CI"] == f"[{100 * ci.low:+.1f}, {100 * ci.high:+.1f}]"
    assert sao_grpo["p: bootstrap"] == "< 0.0001" and sao_grpo["p: seeds"] == f"{welch.pvalue:.2g}"
    assert sao_grpo["paper"] == "97.3 vs 84.2 (AIME2025)" and sao_grpo["seeds"] == "3 vs 3"
    assert (
        sao_grpo["budget, tuning"] == "trajectories=640, tuned: 20 trials/arm" and sao_grpo["level"] == "95%"
    )
    assert rows["Table 1: GRPO+DIS > GRPO (math)"]["verdict"] == f"{Finding.DISAGREE} (exploratory)"
    assert rows["Table 1: SAO > GRPO+DIS (math)"]["verdict"] == f"{Finding.NOT_SHOWN} (exploratory)"
    assert rows["Table 1: SAO > SAO w/ DIS only (math)"]["verdict"] == f"{Finding.OPPOSITE} (exploratory)"
    assert rows["Table 2: SAO > GRPO+DIS (SWE)"]["verdict"] == Finding.NOT_RUN  # no reference


def test_the_primary_claims_are_holm_adjusted(tmp_path):
    seeds = {
        ("sao", "arith"): [0.70, 0.72, 0.68],
        ("grpo", "arith"): [0.60, 0.61, 0.62],
        ("grpo+dis", "arith"): [0.65, 0.66, 0.64],
        ("sao:dis-only", "arith"): [0.69, 0.70, 0.71],
    }
    boot_p = {
        ("sao", "grpo"): 0.0005,
        ("grpo+dis", "grpo"): 0.004,
        ("sao", "grpo+dis"): 0.03,
        ("sao", "sao:dis-only"): 0.6,
    }
    diffs = [(a, o, "arith", 0.05, 0.02, 0.08, p) for (a, o), p in boot_p.items()]
    _reference(tmp_path, "arith-tuned", seeds, diffs)
    # by hand: p = max(bootstrap p, Welch p) for each primary claim, then Holm over the four
    combined = [
        max(p, sps.ttest_ind(seeds[(a, "arith")], seeds[(o, "arith")], equal_var=False).pvalue)
        for (a, o), p in boot_p.items()
    ]
    expected = holm(combined)
    order = sorted(range(4), key=lambda i: combined[i])
    verdicts = [v for v in assess(tmp_path) if v.claim.primary]
    assert [v.claim.label for v in verdicts] == [c.label for c in CLAIMS if c.primary]
    for i, v in enumerate(verdicts):
        assert v.p == pytest.approx(combined[i]) and v.p_adjusted == pytest.approx(expected[i])
        assert v.level == pytest.approx(0.05 / (4 - order.index(i)))  # Holm's step for this rank
    rows = _by_claim(tmp_path)
    first = rows["Table 1, tuned: SAO > GRPO (math)"]
    assert first["role"] == "primary" and first["p: Holm"] == f"{expected[0]:.3g}"
    assert first["level"] == f"{100 * (1 - verdicts[0].level):.4g}%" and first["bootstrap CI"].endswith("†≈")
    shown = expected[0] < 0.05
    assert first["verdict"].startswith(str(Finding.SAME if shown else Finding.DISAGREE))
    assert first["verdict"].endswith(f"(Holm p = {expected[0]:.2g})")
    assert rows["Table 1: SAO > GRPO (math)"]["verdict"] == Finding.NOT_RUN  # exploratory rows: no reference


def test_a_primary_claim_run_alone_is_adjusted_over_the_whole_declared_family(tmp_path):
    seeds = {("sao", "arith"): [0.70, 0.72, 0.71], ("grpo+dis", "arith"): [0.65, 0.66, 0.64]}
    _reference(tmp_path, "arith-tuned", seeds, [("sao", "grpo+dis", "arith", 0.06, 0.04, 0.08, 0.001)])
    welch_p = sps.ttest_ind(seeds[("sao", "arith")], seeds[("grpo+dis", "arith")], equal_var=False).pvalue
    combined = max(0.001, welch_p)
    primary = [v for v in assess(tmp_path) if v.claim.primary]
    (run,) = [v for v in primary if v.p_adjusted is not None]
    # by hand: Holm over four claims, three not run (p = 1): the smallest p is tested at 0.05 / 4
    assert run.claim.label == "Table 1, tuned: SAO > GRPO+DIS (math)"
    assert run.p_adjusted == pytest.approx(min(1.0, 4 * combined))
    assert run.level == pytest.approx(0.05 / 4)
    others = [v for v in primary if v is not run]
    assert len(others) == 3 and all(v.finding == Finding.NOT_RUN for v in others)


def test_drift_without_per_seed_scores_needs_the_re_run_and_spread_seeds_are_named(tmp_path):
    _reference(
        tmp_path,
        "drift",
        {("sao", "drift-recovery"): [0.4, 0.4, 0.4], ("running-mean", "drift-recovery"): [0.4, 0.41, 0.42]},
        [("sao", "running-mean", "drift-recovery", -0.01, -0.05, 0.03, 0.57)],
    )
    _reference(
        tmp_path,
        "ablations",
        {("sao", "arith"): [0.68, 0.71, 0.68], ("ppo:vapo", "arith"): [0.44, 0.66, 0.54]},
        [("sao", "ppo:vapo", "arith", 0.147, 0.06, 0.24, 0.0015)],
    )
    rows = _by_claim(tmp_path)
    drift = rows["Fig. 5: SAO recovers faster than running mean under drift"]
    assert drift["verdict"] == Finding.NEEDS_RERUN and drift["seed-level CI"] == "-"
    vapo = rows["Table 4: SAO (DIS) > vanilla VAPO"]
    assert vapo["seeds beyond noise"].startswith("ppo:vapo (p = ") and vapo["seeds beyond noise"].endswith(
        "(bound)"
    )
    assert vapo["verdict"] == f"{Finding.DISAGREE} (exploratory)" and float(vapo["MDE"]) > 14.7
    legend = write_verdicts(tmp_path).read_text().split("\n| claim |")[0]
    assert '\n- "needs the re-run": the reference committed no per-seed scores' in legend


def test_the_readme_gets_the_compact_table_with_links_from_the_readme(tmp_path):
    root = tmp_path / "results" / "reference"
    _reference(
        root,
        "arith",
        {("sao", "arith"): [0.70, 0.71, 0.69], ("grpo", "arith"): [0.50, 0.52, 0.51]},
        [("sao", "grpo", "arith", 0.19, 0.12, 0.26, 0.001)],
    )
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{README_START}\nold\n{README_END}\n\nafter\n")
    path = write_verdicts(root, readme)
    assert "](arith/figures/fig1_final_scores.png)" in path.read_text() and "Holm" in path.read_text()
    # an old-style reference (seeds paired, no FLOPs): the legend explains the marks it shows
    assert "\n- † the bootstrap of references made before issue 36" in path.read_text()
    text = readme.read_text()
    assert "old" not in text and text.endswith(f"{README_END}\n\nafter\n")
    assert "](results/reference/arith/figures/fig1_final_scores.png)" in text
    row = next(r for r in compact_rows(root) if r["claim"] == "Table 1: SAO > GRPO (math)")
    v = next(v for v in assess(root) if v.claim.label == row["claim"])
    low, high = min(v.boot[0], v.welch[0]), max(v.boot[1], v.welch[1])  # the envelope of both
    assert row["difference [interval]"] == f"+19.0 [{100 * low:+.1f}, {100 * high:+.1f}]"
    assert list(row) == ["claim", "difference [interval]", "verdict", "figure"]


def test_a_report_with_its_score_matrix_gives_exact_intervals_at_holm_s_levels(tmp_path):
    arms = ("sao", "grpo", "grpo+dis", "sao:dis-only")
    cmp = write_comparison(tmp_path / "cmp", arms=arms, seeds=(0, 1, 2), final_eval=(60, 4))
    write_report([cmp], tmp_path / "ref" / "arith-tuned", formats=["csv"], n_boot=2000)
    verdicts = [v for v in assess(tmp_path / "ref") if v.claim.primary]
    assert all(v.evidence is not None and v.evidence.boot_exact for v in verdicts)
    v = verdicts[0]  # sao minus grpo
    a, b = v.evidence.matrices
    expected = paired_difference(a, b, n_boot=2000, confidence=1 - v.level)
    assert v.boot == pytest.approx((expected["ci_low"], expected["ci_high"]))
    row = _by_claim(tmp_path / "ref")["Table 1, tuned: SAO > GRPO (math)"]
    assert (
        "†" not in row["bootstrap CI"] and "≈" not in row["bootstrap CI"] and row["seeds beyond noise"] != "-"
    )
    # no row carries a legacy mark, so the legend does not explain one
    legend = write_verdicts(tmp_path / "ref").read_text().split("\n| claim |")[0]
    assert "\n- † " not in legend and "\n- ≈ " not in legend and "needs the re-run" not in legend


def test_the_committed_readme_and_verdicts_match_the_reference_tables():
    root = REPO / "results" / "reference"
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(README_START) + len(README_START) : readme.index(README_END)].strip()
    assert block == verdicts_markdown(root, "results/reference/", compact=True), (
        "run: bench report --verdicts results/reference --readme README.md"
    )
    assert verdicts_markdown(root) in (root / "VERDICTS.md").read_text()


def test_each_committed_report_s_bottom_line_is_the_verdict_table_s():
    # a reference report's claims are those of its directory's name: one written elsewhere and
    # copied in would judge them as another reference's (it happened: arith-tuned's tuned claim
    # read as the untuned, exploratory one)
    from results.report.bottom_line import bottom_lines, sentence
    from results.report.evidence import Reference
    from results.report.stability_verdicts import stability_sentences

    checked = 0
    for page in sorted((REPO / "results" / "reference").glob("*/index.html")):
        text = page.read_text()
        if "Bottom line" not in text:
            continue  # made before reports opened with one (issue 38: regenerated with the re-runs)
        ref = Reference(page.parent)
        joined = Reference.named(page.parent.parent, page.parent.name)  # judged over all parts
        lines = bottom_lines(ref.diffs, ref.scores, ref.per_seed, ref.matrices, page.parent.name, joined)
        for label, words in [*map(sentence, lines), *stability_sentences(ref.runs)]:
            assert escape(f"{label}:") in text and escape(words) in text, (page.parent.name, label)
            checked += 1
    assert checked >= 2


def test_each_claim_says_how_the_arms_compute_compares(tmp_path):
    from results.report.evidence import compute_comparison

    runs = pd.DataFrame(
        {
            "arm": ["sao", "sao", "grpo+dis", "grpo+dis"],
            "flops": [2.8e15, 3.0e15, 1.0e15, 1.0e15],  # means 2.9e15 and 1e15
            "elapsed_s": [1400.0, 1560.0, 400.0, 400.0],  # 1480 and 400
        }
    )
    assert compute_comparison(runs, "sao", "grpo+dis") == "sao: 2.9x grpo+dis's FLOPs, 3.7x its wall time"
    old = runs.drop(columns="flops")  # a reference from before FLOPs were counted
    assert compute_comparison(old, "sao", "grpo+dis") == "sao: FLOPs not counted, 3.7x grpo+dis's wall time"
    zero = runs.assign(flops=[0.0, 0.0, 1e15, 1e15])  # a run that counted none: not counted either
    assert compute_comparison(zero, "sao", "grpo+dis").startswith("sao: FLOPs not counted")
    assert compute_comparison(pd.DataFrame(), "sao", "grpo") == "-"
    # the full table's compute column, from each reference's runs.csv
    seeds = {("sao", "arith"): [0.60, 0.62, 0.61], ("grpo", "arith"): [0.50, 0.51, 0.52]}
    _reference(tmp_path, "arith-tuned", seeds, [("sao", "grpo", "arith", 0.1, 0.05, 0.15, 0.001)])
    _reference(tmp_path, "arith", seeds, [("sao", "grpo", "arith", 0.1, 0.05, 0.15, 0.001)])
    runs.assign(arm=["sao", "sao", "grpo", "grpo"]).to_csv(tmp_path / "arith-tuned" / "tables" / "runs.csv")
    rows = _by_claim(tmp_path)
    assert (
        rows["Table 1, tuned: SAO > GRPO (math)"]["compute"] == "sao: 2.9x grpo's FLOPs, 3.7x its wall time"
    )
    assert rows["Table 1: SAO > GRPO (math)"]["compute"] == "-"  # that reference committed no runs table
    old.assign(arm=["sao", "sao", "grpo", "grpo"]).to_csv(tmp_path / "arith-tuned" / "tables" / "runs.csv")
    legend = write_verdicts(tmp_path).read_text().split("\n| claim |")[0]
    assert '\n- "FLOPs not counted": runs that counted no model FLOPs' in legend


def test_a_report_of_two_comparisons_states_the_budget_of_the_arms_a_claim_compares(tmp_path):
    """arith-tuned holds the trajectory-matched comparison and GRPO+DIS at SAO's FLOPs: each row
    states the budgets of the comparisons its arms come from."""
    from results.report.evidence import budget_and_tuning

    specs = [
        {
            "arms": [{"name": "sao"}, {"name": "grpo+dis"}],
            "budget": {"kind": "trajectories", "amount": 32000},
        },
        {"arms": [{"name": "grpo+dis-sao-flops"}], "budget": {"kind": "flops", "amount": 27201515203140}},
    ]
    path = tmp_path / "provenance.json"
    path.write_text(json.dumps({"specs": specs}))
    assert budget_and_tuning(path, ("sao", "grpo+dis")) == "trajectories=32000, shared defaults"
    assert budget_and_tuning(path, ("sao", "grpo+dis-sao-flops")) == (
        "trajectories=32000 (sao), flops=2.72e+13 (grpo+dis-sao-flops), shared defaults"
    )


def test_a_reference_reported_in_parts_judges_its_claims_as_one_report_of_all_arms(tmp_path):
    # arith-tuned's SAO and GRPO+DIS were reported before its GRPO and DIS-only arms ran
    # (claims.REFERENCE_PARTS): the claims across parts come from both score matrices, exactly
    # as one report of every arm would give them
    first = write_comparison(
        tmp_path / "first", arms=("sao", "grpo+dis"), seeds=(0, 1, 2), final_eval=(60, 4)
    )
    later = write_comparison(
        tmp_path / "later", arms=("grpo", "sao:dis-only"), seeds=(0, 1, 2), final_eval=(60, 4)
    )
    write_report([first, later], tmp_path / "whole" / "arith-tuned", formats=["csv", "html"], n_boot=500)
    write_report([first], tmp_path / "parts" / "arith-tuned", formats=["csv", "html"], n_boot=500)
    write_report([later], tmp_path / "parts" / "arith-tuned-others", formats=["csv", "html"], n_boot=500)
    # the later part's page says where its claims are stated
    assert "Part of arith-tuned:" in (tmp_path / "parts" / "arith-tuned-others" / "index.html").read_text()
    whole = {v.claim.label: v for v in assess(tmp_path / "whole") if v.claim.primary}
    parts = {v.claim.label: v for v in assess(tmp_path / "parts") if v.claim.primary}
    assert len(whole) == 4 and all(v.evidence is not None for v in whole.values())
    for label, v in whole.items():
        p = parts[label]
        assert p.evidence is not None, label
        assert (p.evidence.diff, *p.evidence.boot, p.evidence.boot_p) == pytest.approx(
            (v.evidence.diff, *v.evidence.boot, v.evidence.boot_p)
        ), label
        assert (p.boot, p.welch, p.p_adjusted, p.finding) == (v.boot, v.welch, v.p_adjusted, v.finding), label
        assert p.budget == v.budget and p.compute == v.compute, label

    # the first part's page (its runs may be gone) gets its bottom line judged over both parts:
    # every claim of the reference, those across the parts too, as one report of all arms says it
    def claim_sentence(page: Path, label: str = "Table 1, tuned: SAO > GRPO+DIS (math)") -> str:
        text, start = page.read_text(), f"{escape(label)}:</span>"
        return text[text.index(start) : text.index("</li>", text.index(start))]

    whole_page, part_page = (tmp_path / d / "arith-tuned" / "index.html" for d in ("whole", "parts"))

    def outside_the_list(text: str) -> str:
        start = text.index(CLAIMS_OPEN)
        return text[:start] + text[text.index(CLAIMS_CLOSE, start) :]

    before = part_page.read_text()
    # the page as written before the join, its sentence made stale: the refresh rewrites it
    part_page.write_text(
        before.replace(claim_sentence(part_page), "Table 1, tuned: SAO &gt; GRPO+DIS (math):</span> stale")
    )
    forest = part_page.parent / "figures" / "forest_differences.png"
    forest.unlink()
    assert refresh_reference_pages(tmp_path / "parts") == [part_page]
    assert forest.stat().st_size > 0  # redrawn from the rewritten lines
    for label in whole:
        assert claim_sentence(part_page, label) == claim_sentence(whole_page, label), label
    assert "grpo+dis vs sao:" not in part_page.read_text()  # the mirror of a claim is not said twice
    assert outside_the_list(part_page.read_text()) == outside_the_list(before)  # figures, tables kept
    write_report([later], tmp_path / "clash" / "arith-tuned", formats=["csv"], n_boot=500)
    write_report([later], tmp_path / "clash" / "arith-tuned-others", formats=["csv"], n_boot=500)
    with pytest.raises(ValueError, match="one name per arm"):
        assess(tmp_path / "clash")


def test_the_bottom_line_says_each_difference_once_in_the_papers_order():
    # the drift report's table has sao - grpo (a pair the paper's claims order so) and grpo - sao
    # (each arm minus the baseline): one difference, said once, as the paper orders it, whatever
    # the rows' order; a mirrored pair no claim orders is said as it first appears
    from results.report.bottom_line import bottom_lines
    from results.report.claims import claim_pairs

    assert ("sao", "grpo") in claim_pairs() and not {("dapo", "ppo"), ("ppo", "dapo")} & claim_pairs()

    def row(arm, baseline, diff):
        return {
            "arm": arm,
            "baseline": baseline,
            "benchmark": "drift-recovery",
            "diff": diff,
            "ci_low": diff - 0.04,
            "ci_high": diff + 0.04,
            "welch_low": diff - 0.02,
            "welch_high": diff + 0.02,
            "verdict": "not distinguishable",
        }

    rows = [
        row("grpo", "sao", 0.005),
        row("ppo", "dapo", 0.01),
        row("sao", "grpo", -0.005),
        row("dapo", "ppo", -0.01),
    ]
    for order, unordered in [(rows, ("ppo", "dapo")), (rows[::-1], ("dapo", "ppo"))]:
        lines = bottom_lines(pd.DataFrame(order), pd.DataFrame(), pd.DataFrame(), {}, "some-report")
        assert [(line.arm, line.other) for line in lines] == [
            pair
            for pair in [(r["arm"], r["baseline"]) for r in order]
            if pair in {("sao", "grpo"), unordered}
        ]
