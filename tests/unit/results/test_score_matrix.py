"""The evidence committed with a report: `score_matrix.csv` holds every (arm, seed, problem)
count, and the report's scores and differences recompute from it alone, to the last digit."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from results.comparison import load
from results.report import tables_from_score_matrix, write_report
from results.report.score_matrix import cell_counts, read_score_matrix

from .synthetic_runs import write_comparison, write_drift_run


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """A 3-arm x 3-seed synthetic comparison with final evaluations (40 problems, k = 4),
    reported with two drift runs (their drift-recovery scores are values, not counts)."""
    root = tmp_path_factory.mktemp("evidence")
    dirs = [
        write_comparison(root / "cmp", seeds=(0, 1, 2), final_eval=(40, 4)),
        write_drift_run(root / "drift-sao", "sao", steps=40),
        write_drift_run(root / "drift-rm", "running-mean", "online", steps=40),
    ]
    write_report(dirs, root / "report", baseline="grpo@arith", formats=["csv"], n_boot=500)
    write_report(dirs[:1], root / "evals", baseline="grpo", formats=["csv"], n_boot=500)
    write_report(dirs[1:], root / "drift", baseline="running-mean:online", formats=["csv"], n_boot=500)
    return root, dirs


def test_the_score_matrix_holds_every_count(report):
    root, dirs = report
    table = pd.read_csv(root / "report" / "score_matrix.csv", dtype=str, keep_default_na=False)
    arms = load(dirs).arms  # the report's arm order, then seeds
    assert list(table.columns[:5]) == ["benchmark", "problem", "k", f"{arms[0]}/s0", f"{arms[0]}/s1"]
    arith = table[table["benchmark"] == "arith"]
    assert len(arith) == 40 and set(arith["k"]) == {"4"}
    counts = cell_counts(load(dirs))
    one = counts[(counts["arm"] == "ppo@arith") & (counts["seed"] == 2)].set_index("problem_id")["correct"]
    assert arith.set_index("problem")["ppo@arith/s2"].astype(int).to_dict() == one.to_dict()
    matrices, ks, read_arms = read_score_matrix(root / "report" / "score_matrix.csv")
    assert read_arms == arms and ks[("sao@arith", "arith")] == 4
    assert ("sao@drift", "drift-recovery") in matrices and ("sao@drift", "drift-recovery") not in ks
    assert (root / "report" / "score_matrix.csv").stat().st_size < 10_000


def _assert_recomputed_as_written(report: Path, scores: pd.DataFrame, diffs: pd.DataFrame) -> None:
    """The recomputed scores and differences equal the report's written tables, row for row."""
    for got, table, key in (
        (scores, "scores.csv", ["arm", "benchmark"]),
        (diffs, "differences.csv", ["arm", "baseline", "benchmark"]),
    ):
        written = pd.read_csv(report / "tables" / table)
        pd.testing.assert_frame_equal(
            got.sort_values(key).reset_index(drop=True)[written.columns].astype(written.dtypes.to_dict()),
            written.sort_values(key).reset_index(drop=True),
            check_dtype=False,
            rtol=1e-12,
        )


@pytest.mark.parametrize(
    "name, baseline, benchmark",
    [
        ("evals", "grpo", "arith"),
        ("drift", "running-mean:online", "drift-recovery"),
        ("report", "grpo@arith", "arith"),
    ],
)
def test_the_reports_intervals_recompute_from_the_score_matrix_alone(report, name, baseline, benchmark):
    root, _ = report
    scores, diffs = tables_from_score_matrix(root / name, baseline=baseline, n_boot=500)
    written_diffs = pd.read_csv(root / name / "tables" / "differences.csv")
    _assert_recomputed_as_written(root / name, scores, diffs)
    assert benchmark in set(diffs["benchmark"]) and len(written_diffs) >= 1


REFERENCES = Path(__file__).resolve().parents[3] / "results" / "reference"


@pytest.mark.parametrize("name", sorted(p.parent.name for p in REFERENCES.glob("*/score_matrix.csv")))
def test_each_committed_reference_s_tables_recompute_from_its_score_matrix(name):
    # issue 36's evidence: anyone can recompute a reference's intervals from the repository alone
    root = REFERENCES / name
    written_diffs = pd.read_csv(root / "tables" / "differences.csv")
    heading = (root / "tables" / "differences.md").read_text().split(": ", 1)[0]
    baseline = heading.removeprefix("**Differences vs ")  # the report's --baseline
    scores, diffs = tables_from_score_matrix(
        root, baseline=baseline, n_boot=int(written_diffs["n_boot"].iloc[0])
    )
    _assert_recomputed_as_written(root, scores, diffs)
