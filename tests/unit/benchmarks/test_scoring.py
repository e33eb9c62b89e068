"""The one per-problem reader: each problem's samples in the order the records first name it,
its score the fraction correct (hand-computed), the same scores wherever they are read."""

from __future__ import annotations

import json

from benchmarks.scoring import correct_by_problem, problem_scores


def _records() -> list[dict]:
    rows = [("b", 1), ("a", 0), ("b", 0), ("a", 0), ("b", 1), ("c", 1)]
    return [{"problem_id": p, "sample_index": i, "correct": c} for i, (p, c) in enumerate(rows)]


def test_scores_per_problem_in_first_seen_order():
    assert correct_by_problem(_records()) == {"b": [True, False, True], "a": [False, False], "c": [True]}
    assert problem_scores(_records()) == {"b": 2 / 3, "a": 0.0, "c": 1.0}


def test_python_m_results_compare_reads_the_same_scores(tmp_path):
    from results.compare import per_problem_scores

    path = tmp_path / "arith.jsonl"
    path.write_text("".join(json.dumps({**r, "benchmark": "arith"}) + "\n" for r in _records()))
    bench, scores, k = per_problem_scores(path)
    assert (bench, scores, k) == ("arith", problem_scores(_records()), 3)
