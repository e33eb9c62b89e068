"""`EvalStore`: records stream to disk as samples finish, an interrupted evaluation resumes
under the same settings, and a finished one is never overwritten silently."""

from __future__ import annotations

import json

import pytest

from results.evals import EvalStore, EvalStoreError, read_records

SETTINGS = {"model": "/m", "benchmark": "arith", "k": 2, "seed": 0, "limit": None}


def _record(problem: str, j: int) -> dict:
    return {"problem_id": problem, "sample_index": j, "correct": j == 0}


def test_records_are_on_disk_before_the_evaluation_ends(tmp_path):
    store = EvalStore(tmp_path, "arith", sync_every=1)
    assert store.resume(SETTINGS) == []
    store.add(_record("p0", 0))
    rows = read_records(tmp_path / "arith.partial.jsonl")  # read while the file is still open
    assert rows == [{"settings": SETTINGS}, _record("p0", 0)]


def test_an_interrupted_evaluation_resumes_only_under_the_same_settings(tmp_path):
    store = EvalStore(tmp_path, "arith")
    store.resume(SETTINGS)
    store.add(_record("p0", 0))
    store.add(_record("p0", 1))
    store.close()  # the process died here
    assert EvalStore(tmp_path, "arith").resume(SETTINGS) == [_record("p0", 0), _record("p0", 1)]
    other = {**SETTINGS, "seed": 1}
    assert EvalStore(tmp_path, "arith").resume(other) == []  # other settings: started afresh
    assert read_records(tmp_path / "arith.partial.jsonl") == [{"settings": other}]


def test_a_finished_evaluation_is_returned_and_other_settings_are_refused(tmp_path):
    store = EvalStore(tmp_path, "arith")
    store.resume(SETTINGS)
    records = [_record("p0", 0), _record("p0", 1)]
    store.finish(records, {"benchmark": "arith", "settings": SETTINGS, "avg_at_k": 0.5})
    assert not (tmp_path / "arith.partial.jsonl").exists()
    again = EvalStore(tmp_path, "arith").finished(SETTINGS)
    assert again is not None and again[0] == records and again[1]["avg_at_k"] == 0.5
    with pytest.raises(EvalStoreError, match=r"other settings \(k\); pass --overwrite"):
        EvalStore(tmp_path, "arith").finished({**SETTINGS, "k": 4})
    assert EvalStore(tmp_path, "arith", overwrite=True).finished({**SETTINGS, "k": 4}) is None
    summary = json.loads((tmp_path / "arith.summary.json").read_text())
    assert summary["settings"] == SETTINGS  # untouched until the new evaluation finishes
