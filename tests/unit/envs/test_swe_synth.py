"""Tests for the `swe-synth` dataset of `--task swe`: generated bugs rebuilt from their ids,
served by the local runtime (tests in the sandbox, SWE-bench grading), fresh training bugs,
held-out evaluation streams, and the `swe-synth` benchmark."""

from __future__ import annotations

import asyncio
import random

import pytest

from benchmarks import registry as bench_registry
from envs.splits import Split
from envs.swe import synthetic
from envs.swe.local_runtime import LocalRuntime
from envs.swe.task import SweTask


def test_generated_ids_rebuild_the_same_bug():
    iid = synthetic.generated_id("eval0", 7)
    assert iid == "synthetic-eval0-000000007" and synthetic.is_generated_id(iid)
    bug = synthetic.bug_for_id(iid)
    synthetic.bug_for_id.cache_clear()  # rebuilt from scratch, not served from the cache
    again = synthetic.bug_for_id(iid)
    assert bug is not again and bug == again and bug.instance.instance_id == iid
    assert synthetic.bug_for_id(synthetic.generated_id("eval0", 8)).files != bug.files
    assert synthetic.bug_for_id(synthetic.generated_id("eval1", 7)).files != bug.files


@pytest.mark.parametrize(
    "bad", ["synthetic-000007", "synthetic-eval0-7", "swe-mini__clamp-1", "synthetic-EVAL-000000001"]
)
def test_other_ids_are_not_generated(bad):
    assert not synthetic.is_generated_id(bad)
    with pytest.raises(KeyError, match="not a generated synthetic instance id"):
        synthetic.bug_for_id(bad)


@pytest.mark.parametrize("stream, index", [("Eval", 0), ("eval-0", 0), ("eval0", -1)])
def test_invalid_streams_refused(stream, index):
    with pytest.raises(ValueError, match="invalid synthetic stream"):
        synthetic.generated_id(stream, index)


def test_local_runtime_grades_generated_bugs_with_their_tests():
    runtime = LocalRuntime()
    bugs = [synthetic.bug_for_id(synthetic.generated_id("eval0", i)) for i in range(3)]

    async def grade_all():
        return await asyncio.gather(
            *(runtime.grade(b.instance, p) for b in bugs for p in (b.instance.patch, ""))
        )

    grades = iter(asyncio.run(grade_all()))
    for bug in bugs:
        runtime.check(bug.instance)
        gold, empty = next(grades), next(grades)
        assert gold.resolved and gold.applied, (bug.instance.instance_id, gold.tests, gold.log)
        assert not empty.resolved
        assert empty.tests[bug.instance.fail_to_pass[0]] == "FAILED"


def test_workspace_diff_of_a_generated_bug_is_its_gold_patch():
    bug = synthetic.bug_for_id(synthetic.generated_id("eval0", 1))

    async def body():
        ws = await LocalRuntime().open(bug.instance)
        try:
            assert await ws.diff() == ""
            await ws.write_file(bug.path, bug.fixed_source)
            return await ws.diff()
        finally:
            await ws.close()

    diff = asyncio.run(body())
    assert diff.splitlines()[-2:] == bug.instance.patch.splitlines()[-2:]
    assert f"+{bug.fixed_line}" in diff.splitlines()


def test_task_trains_on_fresh_bugs_and_evaluates_on_a_separate_stream():
    task = SweTask(dataset="swe-synth")
    assert task.runtime_name == "local" and task.instances == []
    rng = random.Random(0)
    train = [task.sample_problem(rng) for _ in range(5)]
    assert len({p.key for p in train}) == 5
    assert all(p.key.startswith("synthetic-train-") for p in train)
    held_out = task.eval_problems(4, seed=0)
    # the first bugs of the "eval0" stream whose content is in the test bucket, in stream order
    in_test = [
        synthetic.generated_id("eval0", i)
        for i in range(60)
        if synthetic.SPLIT.of(synthetic.bug_content(synthetic.bug_for_id(synthetic.generated_id("eval0", i))))
        is Split.TEST
    ]
    assert [p.key for p in held_out] == in_test[:4]
    assert all(p.key.startswith("synthetic-eval1-") for p in task.eval_problems(2, seed=1))
    env = task.make_env(held_out[0])
    assert env.instance.instance_id == held_out[0].key


@pytest.mark.parametrize(
    "args, message",
    [
        ({"runtime": "docker"}, "swe-synth's generated repositories exist only in runtime=local"),
        ({"data": "x.jsonl"}, "data: only for dataset=swe-verified"),
    ],
)
def test_invalid_combinations_name_the_field(args, message):
    with pytest.raises(ValueError, match=message):
        SweTask(dataset="swe-synth", **args)


def test_benchmark_is_the_held_out_stream():
    spec = bench_registry.get("swe-synth")
    problems = spec.load()
    assert len(problems) == 100
    assert [p.key for p in problems] == [p.key for p in SweTask(dataset="swe-synth").eval_problems(100)]
    assert problems[0].key.startswith("synthetic-eval0-")
    assert problems[0].prompt == synthetic.bug_for_id(problems[0].key).instance.problem_statement


def test_the_tiny_model_on_swe_mini_is_told_to_use_swe_synth(tmp_path, monkeypatch, capsys):
    from bench.config import build_config
    from bench.models import cache
    from bench.models.tiny import new_tiny_model
    from bench.train.setup import load_policy_for_run

    assert "--set task.dataset=swe-synth" in SweTask().tiny_model_note()  # swe-mini: the default
    assert SweTask(dataset="swe-synth").tiny_model_note() is None
    model, tokenizer = new_tiny_model(0)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    monkeypatch.setattr(cache, "existing_base", lambda task, args: tmp_path)
    for dataset, noted in [("swe-mini", True), ("swe-synth", False)]:
        config = build_config({"algo": "sao", "task": "swe", "task_args": {"dataset": dataset}})
        load_policy_for_run(config, SweTask(dataset=dataset))
        assert ("bench: note: the tiny base model resolves none" in capsys.readouterr().out) is noted


@pytest.mark.slow
def test_gold_patches_of_a_sample_resolve_and_empty_ones_do_not():
    # the grader keeps the expected values outside the sandbox (issue 34): no gold fix is lost
    bugs = [synthetic.bug_for_id(synthetic.generated_id("eval0", i)) for i in range(60)]

    async def grade_all():
        runtime, grades = LocalRuntime(), []
        for start in range(0, len(bugs), 10):
            chunk = bugs[start : start + 10]
            grades += await asyncio.gather(
                *(runtime.grade(b.instance, p) for b in chunk for p in (b.instance.patch, ""))
            )
        return grades

    grades = iter(asyncio.run(grade_all()))
    for bug in bugs:
        gold, empty = next(grades), next(grades)
        assert gold.resolved and not gold.tamper, (bug.instance.instance_id, gold.tests, gold.log)
        assert not empty.resolved, bug.instance.instance_id


def test_a_training_stream_never_draws_a_held_out_bug():
    # 3,200 draws: the swe reference's budget (200 steps of 16 trajectories)
    task = SweTask(dataset="swe-synth")
    rng = random.Random(0)
    trained = [synthetic.bug_for_id(task.sample_problem(rng).key) for _ in range(3200)]
    assert {synthetic.SPLIT.of(synthetic.bug_content(b)) for b in trained} == {Split.TRAIN}
    trained_content = {synthetic.bug_content(b) for b in trained}
    test = {synthetic.bug_content(synthetic.bug_for_id(p.key)) for p in task.eval_problems(100)}
    validation = {
        synthetic.bug_content(synthetic.bug_for_id(p.key))
        for p in task.eval_problems(50, split=Split.VALIDATION)
    }
    assert not trained_content & test and not trained_content & validation and not test & validation
    assert len(test) == 100 and len(validation) == 50


def test_the_fixed_swe_datasets_hold_out_no_validation_split():
    with pytest.raises(ValueError, match="holds out a test split only"):
        SweTask(dataset="swe-mini").eval_problems(3, split=Split.VALIDATION)


def test_no_demonstration_is_a_held_out_bug(monkeypatch):
    rng = random.Random(0)
    bugs = [synthetic.demonstration_bug(rng, i) for i in range(300)]
    assert {synthetic.SPLIT.of(synthetic.bug_content(b)) for b in bugs} == {Split.TRAIN}
    # the demonstrations play exactly such bugs (the issue opens each conversation)
    drawn = []
    draw = synthetic.demonstration_bug
    monkeypatch.setattr(synthetic, "demonstration_bug", lambda r, i: drawn.append(draw(r, i)) or drawn[-1])
    played = synthetic.demonstrations(random.Random(0), 5)
    assert [b.instance.problem_statement in m[1]["content"] for b, (m, _) in zip(drawn, played)] == [True] * 5
    assert {synthetic.SPLIT.of(synthetic.bug_content(b)) for b in drawn} == {Split.TRAIN}
    assert SweTask.demonstrations_version == 2
