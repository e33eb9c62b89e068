"""Benchmark specs and loaders: official-schema fixtures, the real data copies, offline failures,
provenance hashes, SWE-bench predictions and harness reports, and the registry's errors.

Fixtures are written into tmp_path in each benchmark's official schema and loaded through
`load(data_path=...)`. The real IMOAnswerBench and GSM8K data: the full copies in
`../shared/data` beside the clone where present, else the samples shipped in
tests/fixtures/data. No test touches the network.
"""

from __future__ import annotations

import ast
import json
import time
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import registry as bench_registry
from benchmarks.base import BenchmarkDataError, data_hash
from benchmarks.registry import BENCHMARKS, UnknownBenchmarkError
from benchmarks.swe_verified import (
    SWEInstance,
    harness_tests_status,
    is_resolved,
    load_instances,
    read_harness_report,
    read_predictions,
    write_predictions,
)
from envs.arith import ArithTask, worked_solution
from envs.math.graders import grade_gsm8k, grade_integer, grade_symbolic
from envs.splits import Split
from tests.benchmark_data import Kind

IMO_CSV = "imobench/answerbench_v2.csv"  # real benchmark data (`benchmark_data` fixture)
GSM8K_JSONL = "gsm8k/test.jsonl"
IMO_DATA_HASH = {
    Kind.FULL: "811bcadf2e5e2e7a1739d132a6dfc591dd051e42b428f6d816f2fb6e9ffa2546",
    Kind.SAMPLE: "f7518b1e602d2a700b427fd687be57d5c2d0bc061b81937e5828eefb17d943a8",
}
"""data_hash of the real IMOAnswerBench v2 copy (and of its sample) under imo-answerbench v1: a
change means the data or the prompt changed, and the spec's version must be bumped."""

HUB_AND_FILE_BENCHMARKS = ("imo-answerbench", "beyond-aime", "aime25", "gsm8k", "swe-verified")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def isolated_caches(tmp_path, monkeypatch):
    """No Hugging Face or download cache from the machine can satisfy a load."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path / "cache"))


# ----------------------------------------------------------------------------- math fixtures


def test_beyond_aime_jsonl(tmp_path):
    path = write_jsonl(
        tmp_path / "beyond.jsonl",
        [{"problem": "Find x. ", "answer": "123"}, {"problem": "Find y.", "answer": 45}],
    )
    spec = bench_registry.get("beyond-aime")
    problems = spec.load(data_path=path)
    assert [p.key for p in problems] == ["beyond-aime-0", "beyond-aime-1"]
    assert [p.answer for p in problems] == ["123", "45"]  # integer cells become strings
    assert problems[0].prompt.startswith("Find x.") and "\\boxed{}" in problems[0].prompt
    assert spec.grader is grade_integer and spec.grader("so \\boxed{45}", problems[1].answer).correct
    assert len(spec.load(data_path=path, limit=1)) == 1


def test_aime25_parquet_and_json(tmp_path):
    rows = [{"problem": f"Problem {i}", "answer": str(70 + i), "id": str(i)} for i in range(3)]
    pd.DataFrame(rows).to_parquet(tmp_path / "aime25.parquet")
    (tmp_path / "aime25.json").write_text(json.dumps(rows), encoding="utf-8")
    spec = bench_registry.get("aime25")
    from_parquet = spec.load(data_path=tmp_path / "aime25.parquet")
    assert [p.key for p in from_parquet] == ["aime25-0", "aime25-1", "aime25-2"]
    assert from_parquet == spec.load(data_path=tmp_path / "aime25.json")
    assert spec.grader is grade_integer and spec.sampling.temperature == 1.0 and spec.sampling.top_p == 1.0


def test_csv_cells_stay_strings(tmp_path):
    (tmp_path / "b.csv").write_text("problem,answer\nWhat is 6*7?,042\n", encoding="utf-8")
    (problem,) = bench_registry.get("beyond-aime").load(data_path=tmp_path / "b.csv")
    assert problem.answer == "042" and grade_integer("\\boxed{42}", problem.answer).correct


def test_gsm8k_fixture(tmp_path):
    rows = [
        {
            "question": "Tom has 1,000 apples and buys 234 more. How many?",
            "answer": "1000+234=1234\n#### 1,234",
        }
    ]
    spec = bench_registry.get("gsm8k")
    (problem,) = spec.load(data_path=write_jsonl(tmp_path / "gsm8k.jsonl", rows))
    assert problem.key == "gsm8k-0000" and spec.grader is grade_gsm8k
    assert spec.grader("The answer is \\boxed{1234}", problem.answer).correct


def test_missing_column_names_expected_columns(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "p", "solution": "s"}])
    with pytest.raises(
        BenchmarkDataError, match=r"lacks column\(s\) answer; expected columns: problem, answer"
    ):
        bench_registry.get("beyond-aime").load(data_path=path)
    (tmp_path / "imo.csv").write_text("Problem ID,Problem\nx,y\n", encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match="Short Answer, Category, Subcategory, Source"):
        bench_registry.get("imo-answerbench").load(data_path=tmp_path / "imo.csv")


def test_bad_files_fail_with_one_line(tmp_path):
    bad_answer = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "3/4"}])
    with pytest.raises(BenchmarkDataError, match=r"row 0 \(beyond-aime-0\).*not an integer"):
        bench_registry.get("beyond-aime").load(data_path=bad_answer)
    dup = write_jsonl(tmp_path / "d.jsonl", [{"problem": "p", "answer": "1", "id": "7"}] * 2)
    with pytest.raises(BenchmarkDataError, match="duplicate problem key 'aime25-7'"):
        bench_registry.get("aime25").load(data_path=dup)
    (tmp_path / "x.txt").write_text("problem,answer\n", encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match="unsupported extension '.txt'"):
        bench_registry.get("aime25").load(data_path=tmp_path / "x.txt")
    with pytest.raises(BenchmarkDataError, match="no such file"):
        bench_registry.get("aime25").load(data_path=tmp_path / "absent.jsonl")


# ----------------------------------------------------------------------------- real copies


def test_real_imo_answerbench_copy(benchmark_data):
    copy = benchmark_data(IMO_CSV)
    imo_csv = copy.path
    spec = bench_registry.get("imo-answerbench")
    problems = spec.load(data_path=imo_csv)
    assert len(problems) == copy.rows and len({p.key for p in problems}) == copy.rows
    first = problems[0]
    assert first.key == "imo-bench-algebra-001" and first.answer == "3"
    assert set(first.meta) == {"category", "subcategory", "source"} and first.meta["category"] == "Algebra"
    assert spec.grader is grade_symbolic and all("\\boxed{}" in p.prompt for p in problems)
    assert spec.data_hash(problems) == IMO_DATA_HASH[copy.kind]
    record = spec.provenance(problems, data_path=imo_csv)
    assert record["version"] == spec.version and record["n_problems"] == copy.rows
    assert record["data_hash"] == IMO_DATA_HASH[copy.kind] and len(record["data_file_sha256"]) == 64


def test_real_gsm8k_copy(benchmark_data):
    copy = benchmark_data(GSM8K_JSONL)
    problems = bench_registry.get("gsm8k").load(data_path=copy.path)
    assert len(problems) == copy.rows and problems[-1].key == f"gsm8k-{copy.rows - 1:04d}"
    assert grade_gsm8k("\\boxed{18}", problems[0].answer).correct  # Janet's ducks


# ----------------------------------------------------------------------------- offline


@pytest.mark.parametrize("name", HUB_AND_FILE_BENCHMARKS)
def test_offline_load_fails_fast_with_override_hint(name, isolated_caches, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.monotonic()
    with pytest.raises(BenchmarkDataError) as info:
        bench_registry.get(name).load()
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "\n" not in message and f"benchmark '{name}'" in message and "--data PATH" in message
    assert "HF_HUB_OFFLINE" in message


def test_unreachable_hub_fails_fast(isolated_caches, monkeypatch):
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: nothing listens
    start = time.monotonic()
    with pytest.raises(BenchmarkDataError, match=r"'ByteDance-Seed/BeyondAIME'.*unreachable.*--data PATH"):
        bench_registry.get("beyond-aime").load()
    assert time.monotonic() - start < 5


# ----------------------------------------------------------------------------- provenance


def test_data_hash_is_stable_and_content_sensitive(tmp_path):
    rows = [{"problem": f"p{i}", "answer": str(i)} for i in range(5)]
    spec = bench_registry.get("beyond-aime")
    problems = spec.load(data_path=write_jsonl(tmp_path / "a.jsonl", rows))
    assert spec.data_hash(problems) == data_hash(spec.load(data_path=tmp_path / "a.jsonl"))
    assert data_hash(problems) == data_hash(list(reversed(problems)))
    changed = spec.load(
        data_path=write_jsonl(tmp_path / "b.jsonl", rows[:4] + [{"problem": "p4", "answer": "5"}])
    )
    assert data_hash(changed) != data_hash(problems)
    assert len(data_hash(problems)) == 64


def test_every_benchmark_is_versioned_and_pinned():
    assert (
        set(bench_registry.names())
        == set(BENCHMARKS)
        >= {"imo-answerbench", "beyond-aime", "aime25", "gsm8k", "swe-verified", "arith"}
    )
    for name in bench_registry.names():
        spec = bench_registry.get(name)
        assert spec.name == name and isinstance(spec.version, int) and spec.version >= 1
        assert spec.description and spec.license and "{problem}" in spec.prompt_template
        assert spec.grader in (grade_integer, grade_symbolic, grade_gsm8k, None)
        source = spec.source.as_dict()
        assert source.get("revision") or source.get("recipe"), f"{name} has no pinned source"
        assert spec.sampling.k >= 1 and spec.sampling.max_new_tokens >= 1
        if name != "arith":
            assert (spec.sampling.temperature, spec.sampling.top_p) == (1.0, 1.0)


def test_benchmarks_package_imports_only_envs():
    """`benchmarks/` may import `envs/`, never `bench/` or `algorithms/` (static check of imports)."""
    package = Path(__file__).resolve().parents[3] / "benchmarks"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for mod in names:
                assert mod.split(".")[0] not in ("bench", "algorithms"), f"{path.name} imports {mod}"


# ----------------------------------------------------------------------------- arith


def test_arith_is_the_task_eval_set():
    spec = bench_registry.get("arith")
    problems = spec.load()
    expected = ArithTask().eval_problems(1000, seed=0)
    assert len(problems) == 1000 and problems == expected  # prompt as is, same keys and meta
    validation = bench_registry.get("arith-val").load()
    assert validation == ArithTask().eval_problems(200, split=Split.VALIDATION)
    assert spec.split is Split.TEST and bench_registry.get("arith-val").split is Split.VALIDATION
    p = problems[0]
    assert spec.grader is grade_integer
    assert spec.grader(worked_solution(p.meta["operands"], p.meta["ops"]), p.answer).correct
    assert spec.provenance(problems)["source"]["kind"] == "builtin"


# ----------------------------------------------------------------------------- SWE-bench


def swe_row(iid: str, f2p: list[str], p2p: list[str]) -> dict:
    """One instance in the official schema (test lists JSON-encoded, as on the hub)."""
    return {
        "repo": "astropy/astropy",
        "instance_id": iid,
        "base_commit": "a" * 40,
        "patch": "diff --git a/x.py b/x.py\n",
        "test_patch": "diff --git a/t.py b/t.py\n",
        "problem_statement": f"Issue for {iid}",
        "hints_text": "",
        "created_at": "2023-01-01T00:00:00Z",
        "version": "5.0",
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        "environment_setup_commit": "b" * 40,
        "difficulty": "<15 min fix",
        "image": f"swebench/sweb.eval.x86_64.{iid.replace('__', '_1776_')}:latest",
        "eval_script": "#!/bin/bash\n",
        "log_parser": "parse_log_astropy",
        "eval_type": "pass_and_fail",
    }


def test_swe_verified_json_fixture(tmp_path):
    rows = [
        swe_row("astropy__astropy-1", ["t.py::test_new"], ["t.py::test_old", "t.py::test_other"]),
        swe_row("astropy__astropy-2", ["t.py::test_b"], []),
    ]
    (tmp_path / "verified.json").write_text(json.dumps(rows), encoding="utf-8")
    instances = load_instances(data_path=tmp_path / "verified.json")
    assert all(isinstance(i, SWEInstance) for i in instances)
    first = instances[0]
    assert first.instance_id == "astropy__astropy-1" and first.version == "5.0"
    assert first.fail_to_pass == ("t.py::test_new",) and first.pass_to_pass == (
        "t.py::test_old",
        "t.py::test_other",
    )
    assert SWEInstance.from_row(first.to_record()) == first
    spec = bench_registry.get("swe-verified")
    problems = spec.load(data_path=tmp_path / "verified.json")
    assert [p.key for p in problems] == ["astropy__astropy-1", "astropy__astropy-2"] and spec.grader is None
    assert (
        "Issue for astropy__astropy-1" in problems[0].prompt
        and problems[0].meta["FAIL_TO_PASS"] == rows[0]["FAIL_TO_PASS"]
    )
    # Parquet with plain list columns (as some exports store them) reads the same.
    plain = [
        dict(r, FAIL_TO_PASS=json.loads(r["FAIL_TO_PASS"]), PASS_TO_PASS=json.loads(r["PASS_TO_PASS"]))
        for r in rows
    ]
    pd.DataFrame(plain).to_parquet(tmp_path / "verified.parquet")
    assert load_instances(data_path=tmp_path / "verified.parquet") == instances
    old_schema = write_jsonl(
        tmp_path / "v4.jsonl", [{k: v for k, v in rows[0].items() if k != "eval_script"}]
    )
    with pytest.raises(BenchmarkDataError, match="lacks column.s. eval_script"):
        load_instances(data_path=old_schema)  # swebench 4 rows: refused, naming the column
    broken = write_jsonl(tmp_path / "broken.jsonl", [dict(rows[0], FAIL_TO_PASS="[not json")])
    with pytest.raises(BenchmarkDataError, match="FAIL_TO_PASS is not a JSON list"):
        load_instances(data_path=broken)


def test_predictions_round_trip(tmp_path):
    records = [
        {"instance_id": "astropy__astropy-1", "model_patch": "diff --git a/x b/x\n+fix\n"},
        {"instance_id": "astropy__astropy-2", "model_patch": "", "model_name_or_path": "other/model"},
    ]
    path = write_predictions(tmp_path / "preds.jsonl", records, model_name_or_path="org/sao-run")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 and set(json.loads(lines[0])) == {
        "instance_id",
        "model_name_or_path",
        "model_patch",
    }
    back = read_predictions(path)
    assert back[0] == {
        "instance_id": "astropy__astropy-1",
        "model_name_or_path": "org/sao-run",
        "model_patch": records[0]["model_patch"],
    }
    assert back[1]["model_name_or_path"] == "other/model" and back[1]["model_patch"] == ""
    with pytest.raises(ValueError, match="duplicate"):
        write_predictions(tmp_path / "dup.jsonl", records + records[:1], model_name_or_path="m")
    with pytest.raises(ValueError, match="no model_name_or_path"):
        write_predictions(tmp_path / "nomodel.jsonl", records[:1])


@pytest.mark.parametrize(
    ("results", "resolved"),
    [
        ({"f": "PASSED", "p1": "PASSED", "p2": "PASSED"}, True),
        ({"f": "FAILED", "p1": "PASSED", "p2": "PASSED"}, False),  # issue not fixed
        ({"f": "PASSED", "p1": "FAILED", "p2": "PASSED"}, False),  # regression
        ({"f": "PASSED", "p1": "ERROR", "p2": "PASSED"}, False),
        ({"f": "PASSED", "p1": "PASSED"}, False),  # a P2P test that did not run counts as failed
        ({"f": "SKIPPED", "p1": "PASSED", "p2": "PASSED"}, False),  # a skipped F2P test is not fixed
        ({"f": "PASSED", "p1": "SKIPPED", "p2": "PASSED"}, True),  # the harness keeps a skipped P2P
        ({"f": "XFAIL", "p1": "PASSED", "p2": "PASSED"}, True),
    ],
)
def test_is_resolved_rule(results, resolved):
    assert is_resolved(harness_tests_status(results, ["f"], ["p1", "p2"])) is resolved


def test_is_resolved_edge_cases():
    assert is_resolved(harness_tests_status({}, [], [])) is True  # empty categories, as the harness
    with pytest.raises(ValueError, match="PASS_TO_PASS"):
        is_resolved({"FAIL_TO_PASS": {"success": [], "failure": []}})


def write_harness_outputs(root: Path) -> Path:
    """A harness run: run report + three per-instance report.json files (one disagreeing)."""
    model, run_id = "org/sao-run", "eval1"
    base = root / "logs" / "run_evaluation" / run_id / model.replace("/", "__")
    cases = {
        "astropy__astropy-1": (True, {"f": "PASSED", "p": "PASSED"}),
        "astropy__astropy-2": (False, {"f": "FAILED", "p": "PASSED"}),
        "astropy__astropy-3": (False, {"f": "PASSED", "p": "PASSED"}),  # flag disagrees with its tests
    }
    for iid, (resolved, results) in cases.items():
        (base / iid).mkdir(parents=True)
        status = harness_tests_status(results, ["f"], ["p"])
        status.update(
            FAIL_TO_FAIL={"success": [], "failure": []}, PASS_TO_FAIL={"success": [], "failure": []}
        )
        entry = {
            "patch_is_None": False,
            "patch_exists": True,
            "patch_successfully_applied": True,
            "resolved": resolved,
            "tests_status": status,
        }
        (base / iid / "report.json").write_text(json.dumps({iid: entry}, indent=4), encoding="utf-8")
    run_report = {
        "total_instances": 500,
        "submitted_instances": 4,
        "completed_instances": 3,
        "resolved_instances": 1,
        "unresolved_instances": 2,
        "empty_patch_instances": 1,
        "error_instances": 0,
        "completed_ids": sorted(cases),
        "incomplete_ids": [],
        "empty_patch_ids": ["astropy__astropy-4"],
        "submitted_ids": sorted([*cases, "astropy__astropy-4"]),
        "resolved_ids": ["astropy__astropy-1"],
        "unresolved_ids": ["astropy__astropy-2", "astropy__astropy-3"],
        "error_ids": [],
        "schema_version": 2,
    }
    path = root / f"{model.replace('/', '__')}.{run_id}.json"
    path.write_text(json.dumps(run_report, indent=4), encoding="utf-8")
    return path


def test_read_harness_report(tmp_path):
    run_report = write_harness_outputs(tmp_path)
    summary = read_harness_report(tmp_path)
    assert summary["resolved_ids"] == ["astropy__astropy-1"] and summary["total_instances"] == 500
    assert summary["resolved_rate"] == pytest.approx(1 / 500) and summary["empty_patch_ids"] == [
        "astropy__astropy-4"
    ]
    assert set(summary["instances"]) == {"astropy__astropy-1", "astropy__astropy-2", "astropy__astropy-3"}
    assert summary["instances"]["astropy__astropy-2"]["tests_status"]["FAIL_TO_PASS"]["failure"] == ["f"]
    assert summary["inconsistent_ids"] == ["astropy__astropy-3"]
    assert read_harness_report(run_report)["resolved_ids"] == ["astropy__astropy-1"]
    # Per-instance reports only (the run report not yet written): ids derived, total unknown.
    run_report.unlink()
    derived = read_harness_report(tmp_path / "logs" / "run_evaluation" / "eval1")
    assert derived["resolved_ids"] == ["astropy__astropy-1"] and derived["total_instances"] is None
    assert (
        derived["unresolved_ids"] == ["astropy__astropy-2", "astropy__astropy-3"]
        and derived["resolved_rate"] is None
    )
    assert summary["error_reasons"] == {}
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchmarkDataError, match="no swebench run report"):
        read_harness_report(tmp_path / "empty")
    with pytest.raises(BenchmarkDataError, match="no harness output"):
        read_harness_report(tmp_path / "missing")


def test_read_harness_report_of_one_run_among_several(tmp_path):
    run_report = write_harness_outputs(tmp_path)
    other = json.loads(run_report.read_text())
    other.update(resolved_ids=[], unresolved_ids=sorted(other["completed_ids"]))
    (tmp_path / "org__sao-run.eval2.json").write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(BenchmarkDataError, match="several run reports"):
        read_harness_report(tmp_path)
    first = read_harness_report(tmp_path, run_id="eval1")
    assert first["resolved_ids"] == ["astropy__astropy-1"] and len(first["instances"]) == 3
    second = read_harness_report(tmp_path, run_id="eval2")
    assert second["resolved_ids"] == [] and second["instances"] == {}  # eval2 wrote no instance reports


# ----------------------------------------------------------------------------- registry


def test_unknown_benchmark_message():
    with pytest.raises(UnknownBenchmarkError) as info:
        bench_registry.get("beyond-aim")
    message = str(info.value)
    assert message.startswith("unknown benchmark 'beyond-aim'; did you mean 'beyond-aime'? available: ")
    assert "aime25" in message and "swe-verified" in message
    assert isinstance(info.value, ValueError)


def test_an_instance_without_report_gets_its_cause_from_run_instance_log(tmp_path):
    """issue 40: the harness's own line (here as swebench 5.0.2 wrote it for an image missing
    offline) says why an instance of error_ids has no report; a log without one gives its last line."""
    logs = tmp_path / "logs" / "run_evaluation" / "r1" / "m"
    (logs / "a__a-1").mkdir(parents=True)
    (logs / "a__a-1" / "run_instance.log").write_text(
        "Traceback (most recent call last):\n"
        "swebench.harness.utils.EvaluationError: Error in evaluation for a__a-1: 500 Server Error for "
        'http+docker://localhost/v1.41/images/create?fromImage=x: Internal Server Error ("no such host")\n'
        "Check (logs/run_evaluation/r1/m/a__a-1/run_instance.log) for more information.\n"
    )
    (logs / "b__b-1").mkdir()
    (logs / "b__b-1" / "run_instance.log").write_text("started\nkilled   by   the  timeout\n\n")
    (logs / "c__c-1").mkdir()
    (logs / "c__c-1" / "report.json").write_text(json.dumps({"c__c-1": {"resolved": True}}))
    report = {"resolved_ids": ["c__c-1"], "error_ids": ["a__a-1", "b__b-1"], "total_instances": 3}
    (tmp_path / "m.r1.json").write_text(json.dumps(report))
    summary = read_harness_report(tmp_path, run_id="r1")
    assert summary["error_reasons"] == {
        "a__a-1": "500 Server Error for http+docker://localhost/v1.41/images/create?fromImage=x: Internal "
        'Server Error ("no such host")',
        "b__b-1": "killed by the timeout",
    }
    other = tmp_path / "logs" / "run_evaluation" / "r2" / "m" / "a__a-1"  # another run's log is not read
    other.mkdir(parents=True)
    (other / "run_instance.log").write_text("Error in evaluation for a__a-1: something else\n")
    assert read_harness_report(tmp_path, run_id="r1")["error_reasons"]["a__a-1"].startswith("500 Server")
