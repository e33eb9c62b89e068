"""`results.compare`: eval record files -> per-problem scores -> paired bootstrap against the base."""

import json

import pytest

from results.compare import CompareError, compare, main, per_problem_scores


def _write(path, outcomes, benchmark="swe-synth"):
    """outcomes: {problem_id: [correct per sample]} -> a bench-eval style record file."""
    lines = [
        json.dumps({"benchmark": benchmark, "problem_id": pid, "sample_index": i, "correct": c})
        for pid, samples in outcomes.items()
        for i, c in enumerate(samples)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_per_problem_scores_average_the_samples(tmp_path):
    path = _write(tmp_path / "a.jsonl", {"p1": [True, False, True, True], "p2": [False] * 4, "p3": [True]})
    bench, scores, k = per_problem_scores(path)
    assert bench == "swe-synth" and k == 4
    assert scores == {"p1": 0.75, "p2": 0.0, "p3": 1.0}


def test_a_uniform_gain_is_found_and_no_change_is_not(tmp_path):
    # 40 problems; the new model solves 2 more samples of 4 on every problem 0-19, nothing else changes:
    # diff = 20 * 0.5 / 40 = +25 points exactly
    base = {f"p{i}": [True, False, False, False] for i in range(40)}
    new = {f"p{i}": ([True, True, True, False] if i < 20 else base[f"p{i}"]) for i in range(40)}
    rows = compare([_write(tmp_path / "base.jsonl", base), _write(tmp_path / "new.jsonl", new)], n_boot=2000)
    assert rows[0]["avg_at_k"] == pytest.approx(0.25) and "diff_points" not in rows[0]
    assert rows[1]["avg_at_k"] == pytest.approx(0.5)
    assert rows[1]["diff_points"] == pytest.approx(25.0)
    assert 0 < rows[1]["ci_low_points"] < 25 < rows[1]["ci_high_points"] <= 50
    assert rows[1]["p_value"] < 0.01
    same = compare([tmp_path / "base.jsonl", tmp_path / "base.jsonl"], n_boot=200)[1]
    assert same["diff_points"] == same["ci_low_points"] == same["ci_high_points"] == 0.0


def test_different_problems_benchmarks_or_files_are_clear_errors(tmp_path, capsys):
    base = _write(tmp_path / "base.jsonl", {"p1": [True], "p2": [False]})
    fewer = _write(tmp_path / "fewer.jsonl", {"p1": [True]})
    other = _write(tmp_path / "other.jsonl", {"p1": [True], "p2": [False]}, benchmark="arith")
    with pytest.raises(CompareError, match="not the base's problems .0 only here, 1 only in the base"):
        compare([base, fewer])
    with pytest.raises(CompareError, match="benchmark 'arith'"):
        compare([base, other])
    (tmp_path / "junk.jsonl").write_text('{"problem_id": "p1"}\n')
    for argv, message in (
        ([str(base), str(tmp_path / "missing.jsonl")], "no such file"),
        ([str(base), str(tmp_path / "junk.jsonl")], "junk.jsonl:1: not an eval record"),
        ([str(base), str(base), "--n-boot", "5"], "--n-boot must be >= 100"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("results.compare: error: ") and message in err and err.count("\n") == 1


def test_cli_table_and_json(tmp_path, capsys):
    base = _write(tmp_path / "base.jsonl", {"p1": [True, False], "p2": [False, False]})
    new = _write(tmp_path / "new.jsonl", {"p1": [True, True], "p2": [True, False]})
    assert main([str(base), str(new), "--n-boot", "200"]) == 0
    table = capsys.readouterr().out
    assert "swe-synth: 2 problems" in table and "base" in table and "+50.0 [" in table
    assert main([str(base), str(new), "--n-boot", "200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["avg_at_k"] for r in rows] == [0.25, 0.75] and rows[1]["k"] == 2
