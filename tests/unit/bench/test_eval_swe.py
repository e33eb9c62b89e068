"""`bench.eval.swe`: the official harness once per sample index, each read back by its own run id,
against the episodes' own instances file, under a wall-clock limit (subprocess faked)."""

import json
import subprocess

from bench.eval import swe

ROWS = [{"instance_id": "astropy__astropy-1", "repo": "astropy/astropy"}]


def _fake_harness(calls):
    def run(command, cwd, capture_output, text, timeout):
        calls.append((command, timeout))
        run_id = command[command.index("--run_id") + 1]
        report = {
            "total_instances": 1,
            "resolved_ids": [] if run_id.endswith("s0") else ["astropy__astropy-1"],
        }
        (cwd / f"org__m.{run_id}.json").write_text(json.dumps(report))
        return subprocess.CompletedProcess(command, 0, "", "")

    return run


def test_every_sample_index_is_graded_by_its_own_run(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(swe, "_why_not", lambda command: None)
    monkeypatch.setattr(swe.subprocess, "run", _fake_harness(calls))
    records = [{"problem_id": "astropy__astropy-1", "sample_index": j, "extracted": "diff"} for j in (0, 1)]
    predictions = swe.write_predictions_files(tmp_path, "swe-verified", records, "org/m")
    result = swe.run_official_harness(predictions, ROWS, tmp_path, max_workers=7, timeout_s=99)
    assert result["status"] == "ran" and result["resolved_rate"] == 0.5
    assert [r["report"]["resolved_ids"] for r in result["runs"]] == [[], ["astropy__astropy-1"]]
    instances = tmp_path / "swe-verified.instances.jsonl"
    assert [json.loads(line) for line in instances.read_text().splitlines()] == ROWS  # the episodes' rows
    for (command, timeout), run in zip(calls, result["runs"]):
        assert timeout == 99 and command[command.index("--max_workers") + 1] == "7"
        assert command[command.index("--dataset_name") + 1] == str(instances.resolve())
        assert command[command.index("--run_id") + 1] == run["run_id"]
    assert calls[0][0][calls[0][0].index("--run_id") + 1].endswith("-s0")


def test_a_harness_past_its_limit_is_stopped_and_reported(tmp_path, monkeypatch):
    def hang(command, cwd, capture_output, text, timeout):
        raise subprocess.TimeoutExpired(command, timeout)

    removed = []
    monkeypatch.setattr(swe, "_why_not", lambda command: None)
    monkeypatch.setattr(swe.subprocess, "run", hang)
    monkeypatch.setattr(swe, "_remove_run_containers", removed.append)
    predictions = swe.write_predictions_files(
        tmp_path, "swe-verified", [{"problem_id": "astropy__astropy-1", "sample_index": 0}], "org/m"
    )
    result = swe.run_official_harness(predictions, ROWS, tmp_path, timeout_s=5)
    assert result["status"] == "failed" and "ran past 5 s" in result["reason"]
    assert removed == [result["runs"][0]["run_id"]] and result["resolved_rate"] is None


def test_not_run_says_why_and_keeps_the_commands(tmp_path, monkeypatch):
    monkeypatch.setattr(swe, "_why_not", lambda command: "no Docker daemon: refused")
    predictions = swe.write_predictions_files(
        tmp_path, "swe-verified", [{"problem_id": "astropy__astropy-1", "sample_index": 0}], "org/m"
    )
    result = swe.run_official_harness(predictions, ROWS, tmp_path)
    assert result["status"] == "not run" and result["reason"] == "no Docker daemon: refused"
    assert result["commands"][0][:3] == [swe.sys.executable, "-m", "swebench.harness.run_evaluation"]


def test_a_harness_that_crashes_is_reported_in_one_line_and_its_containers_removed(tmp_path, monkeypatch):
    """issue 40: the last line of its stderr (a traceback's), with the exit code; stderr kept."""

    def crash(command, cwd, capture_output, text, timeout):
        trace = "Traceback (most recent call last):\n  File x\nValueError: Some prediction IDs not found\n\n"
        return subprocess.CompletedProcess(command, 1, "", trace)

    removed = []
    monkeypatch.setattr(swe, "_why_not", lambda command: None)
    monkeypatch.setattr(swe.subprocess, "run", crash)
    monkeypatch.setattr(swe, "_remove_run_containers", removed.append)
    predictions = swe.write_predictions_files(
        tmp_path, "swe-verified", [{"problem_id": "astropy__astropy-1", "sample_index": 0}], "org/m"
    )
    result = swe.run_official_harness(predictions, ROWS, tmp_path)
    (run,) = result["runs"]
    assert run["reason"] == "exit code 1: ValueError: Some prediction IDs not found"
    assert result["reason"] == f"{run['run_id']}: {run['reason']}" and "Traceback" in run["stderr"]
    assert removed == [run["run_id"]]
