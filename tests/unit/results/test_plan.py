"""`bench power` and `results.plan`: a pilot read from a comparison, a report's score matrix or
per-seed table; the plan printed is the one `benchmarks.power` gives (whose numbers are checked
by hand and by simulation in tests/unit/benchmarks/test_power.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench.cli import main
from benchmarks.power import Design, Variances, estimate_variances, seeds_needed
from benchmarks.seed_stats import minimum_detectable_effect, power_t
from results.plan import PlanError, load_pilot, seed_side_plan
from results.report import write_report
from results.report.score_matrix import cell_counts, matrices_from_counts

from .synthetic_runs import write_comparison


@pytest.fixture(scope="module")
def pilot_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("pilot")
    cmp = write_comparison(root / "cmp", arms=("sao", "grpo"), seeds=(0, 1, 2), final_eval=(50, 4))
    write_report([cmp], root / "report", formats=["csv"], n_boot=200)
    return cmp, root / "report"


def test_a_pilot_from_a_comparison_and_from_its_report_agree(pilot_dirs):
    cmp, report = pilot_dirs
    from_cmp, from_report = load_pilot(cmp, None, None, None), load_pilot(report, None, None, None)
    assert (from_cmp.arm, from_cmp.baseline, from_cmp.benchmark) == ("sao", "grpo", "arith")
    assert from_cmp.design == Design(3, 50, 4) and from_cmp.variances == pytest.approx(from_report.variances)
    from results.comparison import load

    matrices, _ = matrices_from_counts(cell_counts(load([cmp])))
    expected = estimate_variances(
        matrices[("sao", "arith")].to_numpy(), matrices[("grpo", "arith")].to_numpy(), 4
    )
    assert from_cmp.variances == pytest.approx(expected)
    with pytest.raises(
        PlanError, match="--arm 'dapo' is not one of the pilot's arms; choose one of sao, grpo"
    ):
        load_pilot(cmp, "dapo", "grpo", None)


def test_a_per_seed_table_plans_the_seed_side_only(tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir()
    seeds = {"sao": [0.6625, 0.7225, 0.6975], "grpo+dis": [0.6625, 0.6725, 0.67]}
    pd.DataFrame(
        [
            {"arm": a, "seed": i, "benchmark": "arith", "avg_at_k": x}
            for a, s in seeds.items()
            for i, x in enumerate(s)
        ]
    ).to_csv(tables / "per_seed.csv", index=False)
    pd.DataFrame(
        [{"arm": a, "benchmark": "arith", "mean": 0.7, "n_problems": 200, "k": 2} for a in seeds]
    ).to_csv(tables / "scores.csv", index=False)
    pilot = load_pilot(tmp_path, None, None, None)
    assert pilot.variances is None and pilot.design == Design(3, 200, 2)
    needed, at_pilot = seed_side_plan(pilot, 0.03, 0.05, 0.8)
    # by hand: Welch at S seeds per arm with the pilot's seed-mean variances
    va, vb = np.var(seeds["sao"], ddof=1), np.var(seeds["grpo+dis"], ddof=1)

    def se_df(s):
        a, b = va / s, vb / s
        return math.sqrt(a + b), (a + b) ** 2 / ((a**2 + b**2) / (s - 1))

    assert power_t(0.03, *se_df(needed)) >= 0.8 > power_t(0.03, *se_df(needed - 1))
    assert at_pilot == pytest.approx(minimum_detectable_effect(*se_df(3)))


def test_bench_plan_prints_the_seeds_each_design_needs(pilot_dirs, capsys):
    _, report = pilot_dirs
    assert main(["power", str(report), "--diff", "5", "--problems", "50,500", "--samples", "4"]) == 0
    out = capsys.readouterr().out
    pilot = load_pilot(report, None, None, None)
    for n_problems in (50, 500):
        seeds = seeds_needed(0.05, pilot.variances, n_problems, 4)
        assert f"{n_problems:<8}  4        {seeds if seeds else '> 1000'}" in out
    assert out.startswith(f"pilot: {report}/score_matrix.csv: sao minus grpo on arith, 3 seeds per arm")


def test_bench_plan_from_variances_given_directly(capsys):
    args = ["--seed-sd", "2", "--seed-problem-sd", "10", "--sample-sd", "45", "--problem-sd", "8"]
    assert main(["power", "--diff", "3", *args, "--problems", "1000", "--samples", "2"]) == 0
    var = Variances(0.02**2, 0.02**2, 0.1**2, 0.45**2, 0.08**2)
    assert f"1000      2        {seeds_needed(0.03, var, 1000, 2)}" in capsys.readouterr().out
