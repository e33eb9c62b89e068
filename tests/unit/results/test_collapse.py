"""The collapse rule fixed before the stability runs (`results.collapse`), frozen on hand-made
reward curves, and the Kaplan-Meier survival it feeds (hand-computed), through the report.

(The rule replaced the runs table's earlier `reward_collapsed`: last tenth below half the best
tenth; issue 36 asks one rule to serve both.)"""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from results.collapse import (
    FRACTION,
    MIN_STEP,
    WINDOW,
    TimeToCollapse,
    collapse_step,
    deepest_fall,
    kaplan_meier,
    logrank_exact_p,
    logrank_statistic,
    median_steps_to_collapse,
    smallest_exact_p,
    time_to_collapse,
)
from results.comparison import load
from results.report.stability import DEEPEST_FALL, stability_table, survival_figure


def _curve(values) -> list[tuple[int, float]]:
    return list(enumerate(values, start=1))


def test_the_rule_s_numbers_are_frozen():
    assert (WINDOW, MIN_STEP, FRACTION) == (20, 50, 0.5)


def test_a_steady_or_noisy_run_never_collapses():
    assert collapse_step(_curve([0.5] * 1000)) is None
    assert collapse_step(_curve([0.3, 0.7] * 500)) is None  # per-step noise, a steady 20-step mean
    assert collapse_step(_curve([0.0] * 200)) is None  # never rewarded: nothing to fall from
    assert collapse_step(_curve([0.5] * 10)) is None  # too short for a window


def test_a_fall_to_a_fifth_collapses_where_the_trailing_mean_crosses_half_the_best():
    # 0.5 for 100 steps, then 0.1: the mean of steps s-19..s is (0.5 (120 - s) + 0.1 (s - 100)) / 20,
    # below 0.25 from s = 113 on (0.24; at 112: 0.26)
    assert collapse_step(_curve([0.5] * 100 + [0.1] * 100)) == 113
    # a fall before step 50 counts from step 50: the trailing mean there (0.1) is below half of 0.5
    assert collapse_step(_curve([0.5] * 20 + [0.1] * 80)) == 50
    # a slow decline to 60% of the best is not a collapse
    assert collapse_step(_curve([0.5] * 100 + [0.3] * 100)) is None


def test_the_deepest_fall_is_the_lowest_trailing_mean_over_the_best_before_it():
    assert deepest_fall(_curve([0.5] * 100 + [0.1] * 100)) == pytest.approx(0.2)  # 0.1 / 0.5
    assert deepest_fall(_curve([0.5] * 100 + [0.3] * 100)) == pytest.approx(0.6)  # no collapse, but near
    assert (
        deepest_fall(_curve([0.5] * 1000)) == 1.0
        and deepest_fall(_curve([0.1 * i for i in range(80)])) == 1.0
    )
    assert math.isnan(deepest_fall(_curve([0.5] * 10)))  # too short for the rule's window
    assert math.isnan(deepest_fall(_curve([0.0] * 200)))  # never rewarded: no best to fall from


def test_a_diverged_run_collapses_at_its_last_step_unless_it_had_already():
    assert collapse_step(_curve([0.5] * 30), diverged=True) == 30
    assert collapse_step(_curve([0.5] * 100 + [0.1] * 100), diverged=True) == 113
    assert time_to_collapse(_curve([0.5] * 80), last_step=80) == TimeToCollapse(80, False)
    assert time_to_collapse(_curve([0.5] * 80), last_step=80, diverged=True) == TimeToCollapse(80, True)


def test_kaplan_meier_by_hand():
    # collapses at 100 and 150, one run censored at 120, one at 200: S(100) = 3/4; at 150 two
    # are at risk (150, 200), one collapses: S = 3/4 x 1/2 = 3/8
    times = [
        TimeToCollapse(100, True),
        TimeToCollapse(120, False),
        TimeToCollapse(150, True),
        TimeToCollapse(200, False),
    ]
    curve = kaplan_meier(times)
    assert curve["step"].tolist() == [0, 100, 150]
    assert curve["at_risk"].tolist() == [4, 4, 2] and curve["collapsed"].tolist() == [0, 1, 1]
    assert curve["survival"].tolist() == pytest.approx([1.0, 0.75, 0.375])
    assert median_steps_to_collapse(times) == "150"
    stable = [TimeToCollapse(1000, False)] * 3
    assert median_steps_to_collapse(stable) == "> 1000" and kaplan_meier(stable)["survival"].tolist() == [1.0]
    assert median_steps_to_collapse([]) == "-"


def _run(root, arm, seed, rewards, outcome="finished"):
    run = root / "runs" / f"{arm}-s{seed}"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"algo": arm, "seed": seed}))
    lines = [{"step": s, "reward/mean": r} for s, r in _curve(rewards)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (run / "summary.json").write_text(json.dumps({"outcome": outcome, "consumption": {}}))


def test_the_report_counts_collapses_per_arm_and_draws_their_survival(tmp_path):
    root = tmp_path / "cmp"
    spec = {"arms": [{"name": "grpo"}, {"name": "sao"}], "seeds": [0, 1, 2], "task": "arith"}
    root.mkdir()
    (root / "comparison.json").write_text(json.dumps(spec))
    for seed in range(3):
        (root / "status").mkdir(exist_ok=True)
        for arm in ("grpo", "sao"):
            (root / "status" / f"{arm}-s{seed}.json").write_text(json.dumps({"state": "finished"}))
        _run(root, "sao", seed, [0.5] * 200)
    _run(root, "grpo", 0, [0.5] * 100 + [0.1] * 100)  # collapses at 113
    _run(root, "grpo", 1, [0.5] * 60, outcome="non-finite")  # diverged: collapses at 60
    _run(root, "grpo", 2, [0.5] * 200)
    comparison = load([root])
    runs = comparison.runs.set_index("run")
    assert runs.loc["grpo-s0", "collapse_step"] == 113 and bool(runs.loc["grpo-s1", "collapsed"])
    assert not runs.loc["sao-s0", "collapsed"]
    table = stability_table(comparison).set_index("arm")
    assert (
        table.loc["grpo", "collapsed / runs"] == "2 / 3" and table.loc["grpo", "collapse steps"] == "60, 113"
    )
    assert table.loc["grpo", "median steps to collapse"] == "113"  # S: 2/3 after 60, 1/3 after 113
    assert table.loc["grpo", DEEPEST_FALL] == "0.20, 1.00, 1.00"  # the diverged run had not fallen
    assert table.loc["sao", DEEPEST_FALL] == "1.00, 1.00, 1.00"
    assert (
        table.loc["sao", "collapsed / runs"] == "0 / 3"
        and table.loc["sao", "median steps to collapse"] == "> 200"
    )
    (figure,) = survival_figure(comparison, tmp_path / "figures")
    assert figure.png.is_file() and "fixed before the runs" in figure.caption


def test_the_log_rank_statistic_by_hand_and_its_sign():
    # a: collapses at 10, censored at 20; b: collapses at 5 and 15. At each collapse step, the
    # expected collapses of a = d n_a / n and the variance n_a n_b d (n - d) / (n^2 (n - 1)):
    # step 5: n 4 (a 2): E 1/2, V 1/4; step 10: n 3 (a 2): E 2/3, V 2/9; step 15: n 2 (a 1): E 1/2,
    # V 1/4. Observed 1, expected 5/3: (O - E) / sqrt(V) = -(2/3) / sqrt(13/18); a collapses
    # later, so the statistic's sign here (later = positive) makes it +0.784
    a = [TimeToCollapse(10, True), TimeToCollapse(20, False)]
    b = [TimeToCollapse(5, True), TimeToCollapse(15, True)]
    assert logrank_statistic(a, b) == pytest.approx((2 / 3) / math.sqrt(13 / 18))
    assert logrank_statistic(b, a) == pytest.approx(-(2 / 3) / math.sqrt(13 / 18))
    stable = [TimeToCollapse(1000, False)] * 3
    assert logrank_statistic(stable, stable) == 0.0  # no collapse: nothing tells them apart


def test_the_exact_log_rank_p_counts_the_splits_as_extreme():
    stable = [TimeToCollapse(1000, False)] * 3
    falling = [TimeToCollapse(100, True), TimeToCollapse(200, True), TimeToCollapse(300, True)]
    # of the C(6, 3) = 20 splits only this one and its mirror are this extreme: 2 / 20
    assert logrank_exact_p(stable, falling) == pytest.approx(0.1) == smallest_exact_p(3, 3)
    assert stats.logrank(  # the normal approximation says 0.025: far too small at 3 runs per arm
        stats.CensoredData(right=[1000] * 3), stats.CensoredData(uncensored=[100, 200, 300])
    ).pvalue == pytest.approx(0.0246, abs=1e-4)
    # 4 vs 4: 2 / 70; one collapse alone cannot tell the arms apart (every split as extreme)
    four = [TimeToCollapse(1000, False)] * 4
    assert logrank_exact_p(four, [*falling, TimeToCollapse(400, True)]) == pytest.approx(2 / 70)
    assert logrank_exact_p(stable, [*stable[:2], TimeToCollapse(200, True)]) == 1.0
    assert logrank_exact_p(stable, stable) == 1.0
    # unequal arms have no mirror split, so the floor is 1 / C(7, 3); here one other split is as
    # extreme (the three earliest collapses against the rest, the other way): 2 / 35
    assert logrank_exact_p(stable, [*falling, TimeToCollapse(400, True)]) == pytest.approx(2 / 35)
    assert smallest_exact_p(3, 4) == pytest.approx(1 / 35)


def test_past_the_exact_limit_the_p_is_sampled_and_stays_valid(monkeypatch):
    import results.collapse as collapse

    monkeypatch.setattr(collapse, "EXACT_SPLITS", 11)  # below the 20 splits: 11 random ones
    stable = [TimeToCollapse(1000, False)] * 3
    falling = [TimeToCollapse(100, True), TimeToCollapse(200, True), TimeToCollapse(300, True)]
    p = logrank_exact_p(stable, falling)
    assert 1 / 12 <= p <= 1 and round(p * 12) == pytest.approx(p * 12)  # (1 + as extreme) / (1 + 11)
