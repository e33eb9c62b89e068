"""`bench.eval.evaluate`: records, summary consistency, provenance, determinism, pass@k, swe-verified."""

from __future__ import annotations

import dataclasses
import json
import sys
import zlib

import pytest

from bench.commands.eval_tables import print_results
from bench.eval.evaluate import evaluate
from bench.models.tiny import new_tiny_model
from benchmarks import registry as bench_registry
from benchmarks import stats
from benchmarks.base import BenchmarkSpec, BuiltinSource, SamplingDefaults
from benchmarks.scoring import eval_metrics, summarize
from envs.base import Problem
from envs.math.graders import GradeResult
from envs.swe.docker_runtime import MISSING_EXTRA
from results.evals import write_eval
from tests.requires import requires

SAMPLING = {"max_new_tokens": 24}  # a random model rarely stops by itself: keep samples short
RECORD_FIELDS = {
    "benchmark",
    "problem_id",
    "sample_index",
    "completion",
    "extracted",
    "correct",
    "grader_method",
    "tokens",
    "seconds",
    "finish_reason",
}
PROVENANCE_KEYS = {
    "benchmark",
    "version",
    "source",
    "data_hash",
    "data_path",
    "sampling",
    "engine",
    "seed",
    "git_commit",
    "model",
    "environment",
}


@pytest.fixture(scope="module")
def tiny():
    return new_tiny_model(0)


@pytest.fixture(scope="module")
def arith_result(tiny):
    model, tokenizer = tiny
    return evaluate(
        model, tokenizer, bench_registry.get("arith"), k=2, limit=5, sampling=SAMPLING, seed=0, progress=False
    )


def test_records_and_summary_are_consistent(arith_result, tmp_path):
    records, summary = arith_result.records, arith_result.summary
    assert len(records) == 10
    assert all(RECORD_FIELDS <= set(r) for r in records)
    assert [(r["problem_id"], r["sample_index"]) for r in records][:2] == [
        (records[0]["problem_id"], 0),
        (records[0]["problem_id"], 1),
    ]
    assert all(r["tokens"] <= 24 and r["finish_reason"] in {"eos", "stop", "length"} for r in records)

    by_problem: dict[str, list[bool]] = {}
    for r in records:
        by_problem.setdefault(r["problem_id"], []).append(r["correct"])
    avg = sum(sum(v) / len(v) for v in by_problem.values()) / len(by_problem)
    assert summary["avg_at_k"] == pytest.approx(avg)
    assert summary["pass_at_k"]["1"] == pytest.approx(avg)
    assert (summary["benchmark"], summary["version"], summary["n_problems"], summary["k"]) == (
        "arith",
        2,  # arith v2: the test bucket of the split by content
        5,
        2,
    )
    assert sum(summary["grader_methods"].values()) == 10 and sum(summary["finish_reasons"].values()) == 10
    assert summary["total_tokens"] == sum(r["tokens"] for r in records)
    for key in ("stderr", "ci95", "bootstrap_ci95", "n_string_fallback"):
        assert key in summary

    prov = summary["provenance"]
    assert PROVENANCE_KEYS <= set(prov)
    assert prov["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 24, "stop": [], "k": 2}
    assert prov["engine"] == "torch" and prov["seed"] == 0 and len(prov["data_hash"]) == 64

    records_path, summary_path = write_eval(tmp_path, arith_result.records, arith_result.summary)
    assert records_path.name == "arith.jsonl" and summary_path.name == "arith.summary.json"
    assert [json.loads(line) for line in records_path.read_text().splitlines()] == records
    assert json.loads(summary_path.read_text())["avg_at_k"] == summary["avg_at_k"]


def test_same_seed_same_completions(tiny, arith_result):
    model, tokenizer = tiny
    again = evaluate(
        model,
        tokenizer,
        bench_registry.get("arith"),
        k=2,
        limit=5,
        sampling=SAMPLING,
        seed=0,
        progress=False,
        engine_slots=3,
    )  # other batching, same per-sample seeds
    assert [r["completion"] for r in again.records] == [r["completion"] for r in arith_result.records]
    assert again.summary["provenance"]["data_hash"] == arith_result.summary["provenance"]["data_hash"]


def _fake_grader(completion: str, answer: str) -> GradeResult:
    """Deterministic pseudo-verdicts from the completion text: some right, some wrong, two methods."""
    h = zlib.crc32(completion.encode())
    return GradeResult(h % 3 == 0, completion[:3], "fallback-normalized-string" if h % 2 else "integer")


def _fake_spec() -> BenchmarkSpec:
    rows = [{"key": f"p{i}", "problem": f"{i}+1=?\n", "answer": str(i + 1)} for i in range(4)]
    return BenchmarkSpec(
        name="fake",
        version=3,
        description="fake",
        license="none",
        prompt_template="{problem}",
        source=BuiltinSource(recipe="test rows", build=lambda: rows),
        grader=_fake_grader,
        sampling=SamplingDefaults(max_new_tokens=6, k=5),
        columns=("problem", "answer"),
        parse_row=lambda i, row: Problem(key=row["key"], prompt=row["problem"], answer=row["answer"]),
    )


def test_pass_at_k_matches_stats(tiny):
    model, tokenizer = tiny
    model.train()
    result = evaluate(model, tokenizer, _fake_spec(), k=None, seed=1, progress=False)
    assert model.training  # the caller's mode is restored (the training loop evaluates its policy)
    model.eval()
    summary = result.summary
    assert summary["k"] == 5 and len(result.records) == 20  # k from the spec's defaults
    counts: dict[str, int] = {}
    for r in result.records:
        counts[r["problem_id"]] = counts.get(r["problem_id"], 0) + r["correct"]
    for kk in (1, 5):
        expected = sum(stats.pass_at_k(5, c, kk) for c in counts.values()) / 4
        assert summary["pass_at_k"][str(kk)] == pytest.approx(expected)
    pass1 = [c / 5 for c in counts.values()]
    ci = stats.mean_stderr_ci(pass1)
    assert summary["stderr"] == pytest.approx(ci["stderr"])
    assert summary["ci95"] == pytest.approx([ci["ci_low"], ci["ci_high"]])
    assert summary["n_string_fallback"] == sum(
        r["grader_method"].startswith("fallback") for r in result.records
    )
    assert summary["version"] == 3
    metrics = eval_metrics(summary)
    assert metrics["eval/fake/avg_at_k"] == summary["avg_at_k"] and "eval/fake/pass_at_5" in metrics


def _one_verified_row(tmp_path):
    """A SWE-bench Verified file of one row in the swebench 5 schema."""
    row = {
        "repo": "astropy/astropy",
        "instance_id": "astropy__astropy-12907",
        "base_commit": "a" * 40,
        "patch": "",
        "test_patch": "",
        "problem_statement": "issue",
        "version": "4.3",
        "FAIL_TO_PASS": '["t.py::test_a"]',
        "PASS_TO_PASS": "[]",
        "environment_setup_commit": "b" * 40,
        "image": "swebench/sweb.eval.x86_64.astropy_1776_astropy-12907:latest",
        "eval_script": "#!/bin/bash\n",
        "log_parser": "parse_log_astropy",
        "eval_type": "pass_and_fail",
    }
    data = tmp_path / "verified.json"
    data.write_text(json.dumps([row]))
    return data


def test_swe_verified_without_the_swe_extra_names_the_extra(tiny, tmp_path, monkeypatch):
    """The README's install has neither swebench nor the docker SDK: the error is the install
    hint. Where the extra is installed, importing them is made to fail the same way."""
    model, tokenizer = tiny
    loaded = [name for name in sys.modules if name.split(".")[0] in ("swebench", "docker")]
    for name in {"swebench", "docker", *loaded}:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError
    data = _one_verified_row(tmp_path)
    with pytest.raises(ValueError) as info:
        evaluate(model, tokenizer, bench_registry.get("swe-verified"), k=1, data_path=data, progress=False)
    assert str(info.value) == MISSING_EXTRA


def test_swe_verified_without_a_docker_daemon_says_so(tiny, tmp_path, monkeypatch):
    """With the swe extra, a daemon that does not answer (here: DOCKER_HOST names a socket that
    does not exist, whether or not this machine runs Docker) is the error."""
    requires("swebench")
    model, tokenizer = tiny
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-docker.sock'}")
    data = _one_verified_row(tmp_path)
    with pytest.raises(ValueError, match=r"^--runtime docker needs a running Docker daemon: \S"):
        evaluate(model, tokenizer, bench_registry.get("swe-verified"), k=1, data_path=data, progress=False)


def test_bad_settings_are_user_errors(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="top_p"):
        evaluate(
            model, tokenizer, bench_registry.get("arith"), k=1, limit=1, sampling={"top_p": 0}, progress=False
        )
    with pytest.raises(ValueError, match="unknown sampling"):
        evaluate(
            model, tokenizer, bench_registry.get("arith"), k=1, limit=1, sampling={"topp": 1}, progress=False
        )


def test_model_tiny_means_the_base_checkpoint_of_the_benchmarks_task():
    from bench.errors import UsageError
    from bench.eval.checkpoints import tiny_task

    assert tiny_task(["swe-mini"]) == tiny_task(["swe-synth"]) == tiny_task(["swe-verified"]) == "swe"
    assert tiny_task(["agent"]) == "agent" and tiny_task(["arith", "gsm8k"]) == "arith"
    with pytest.raises(UsageError, match="evaluate them one at a time"):
        tiny_task(["arith", "swe-synth"])


def test_breakdown_splits_avg_at_k_by_a_meta_key(arith_result, capsys):
    # hand-computed: level 1 -> p0 (2/2) and p1 (0/2) = 0.5; level 2 -> p2 (1/2) = 0.5; p3 has no level
    spec = dataclasses.replace(_fake_spec(), breakdown="level")
    problems = [
        Problem(f"p{i}", "", "", meta={"level": lvl} if lvl else {}) for i, lvl in enumerate([1, 1, 2, 0])
    ]
    verdicts = {"p0": [1, 1], "p1": [0, 0], "p2": [1, 0], "p3": [0, 1]}
    records = [
        {
            "problem_id": pid,
            "correct": bool(c),
            "grader_method": "integer",
            "finish_reason": "eos",
            "tokens": 3,
        }
        for pid, cs in verdicts.items()
        for c in cs
    ]
    summary = summarize(records, spec, 2, {}, problems=problems)
    groups = summary["breakdown"]["groups"]
    assert summary["breakdown"]["key"] == "level" and list(groups) == ["1", "2", "none"]
    assert [(g["n_problems"], g["avg_at_k"]) for g in groups.values()] == [(2, 0.5), (1, 0.5), (1, 0.5)]
    # level 1's normal interval, 0.5 -+ 1.96 * 0.5, crosses both edges: clipped to the pass-rate range
    assert groups["1"]["ci95"] == [0.0, 1.0]
    assert eval_metrics(summary)["eval/fake/level=2/avg_at_k"] == 0.5

    # the arith benchmark splits by chain length; the groups cover every problem
    arith = arith_result.summary["breakdown"]
    assert arith["key"] == "n_operands"
    assert sum(g["n_problems"] for g in arith["groups"].values()) == 5
    assert [int(v) for v in arith["groups"]] == sorted(int(v) for v in arith["groups"])
    print_results([arith_result.summary], [])
    assert "arith by n_operands:" in capsys.readouterr().out
