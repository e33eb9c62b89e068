"""`results.phases`: a drift run's metrics cut into phase stretches, hand-computed means."""

import json
import math

import pytest

from results.phases import main, phase_segments


def _rows():
    # phase 0 for steps 1-3 (style 0.2, 0.4, 0.9), phase 1 for steps 4-5; an eval-only line between
    styles = [(1, 0, 0.2), (2, 0, 0.4), (3, 0, 0.9), (4, 1, 0.1), (5, 1, 0.5)]
    rows = [
        {"step": s, "drift/phase": float(p), "reward/style": st, "reward/mean": st / 2} for s, p, st in styles
    ]
    rows.insert(3, {"step": 3, "eval/arith/avg_at_k": 0.4})
    return rows


def test_segments_split_at_phase_changes_and_average_the_edges():
    first, second = phase_segments(_rows(), edge=2)
    assert (first["phase"], first["first_step"], first["last_step"], first["steps"]) == (0, 1, 3, 3)
    assert first["style_first"] == pytest.approx(0.3) and first["style_last"] == pytest.approx(0.65)
    assert first["reward_last"] == pytest.approx(0.325)
    # a stretch shorter than 2 * edge: both ends overlap, each uses what there is
    assert (second["phase"], second["steps"]) == (1, 2)
    assert second["style_first"] == second["style_last"] == pytest.approx(0.3)


def test_a_phase_that_comes_back_is_a_new_stretch():
    rows = _rows() + [{"step": 6, "drift/phase": 0.0, "reward/style": 1.0, "reward/mean": 0.5}]
    assert [s["phase"] for s in phase_segments(rows)] == [0, 1, 0]


def test_a_step_split_evenly_between_phases_counts_toward_the_new_one():
    # mean phases 0.5 and 1.5 both straddle a switch; round() would give 0 and 2
    rows = [
        {"step": s, "drift/phase": p, "reward/style": 0.5, "reward/mean": 0.5}
        for s, p in [(1, 0.0), (2, 0.5), (3, 1.0), (4, 1.5), (5, 2.0), (6, 1.25)]
    ]
    assert [(s["phase"], s["steps"]) for s in phase_segments(rows)] == [(0, 1), (1, 2), (2, 2), (1, 1)]


def test_cli_table_json_and_errors(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    assert main([str(run), "--edge", "1"]) == 0
    table = capsys.readouterr().out
    assert "0.20 -> 0.90" in table and "4-5" in table
    assert main([str(run), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2

    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 0.5}) + "\n")
    assert main([str(run)]) == 2 and "no drift/phase metrics" in capsys.readouterr().err
    assert main([str(tmp_path / "none")]) == 2 and "no metrics.jsonl" in capsys.readouterr().err
    assert main([str(run), "--edge", "0"]) == 2


def test_missing_values_give_nan_not_an_error():
    rows = [{"step": 1, "drift/phase": 0.0, "reward/style": 0.5}]  # no reward/mean
    (segment,) = phase_segments(rows)
    assert segment["style_first"] == 0.5 and math.isnan(segment["reward_first"])
