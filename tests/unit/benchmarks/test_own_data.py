"""`math`, the own-data benchmark: a math run's held-out rows, built from its task arguments,
asked and graded as its rollouts were (benchmarks/own_data.py, benchmarks/registry.py and
`bench eval`'s choice of those arguments)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.errors import UsageError
from bench.eval.own_data import benchmark_specs, own_data_spec
from benchmarks import registry
from benchmarks.base import BenchmarkDataError
from benchmarks.registry import UnknownBenchmarkError
from envs.math.tasks import MathTask

BYO = Path(__file__).resolve().parents[2] / "fixtures" / "byo"


@pytest.fixture
def products(tmp_path: Path) -> Path:
    """60 distinct products in TRL's layout (a prompt and a boxed solution)."""
    rows = [
        {"prompt": f"What is {a}*{b}?", "solution": f"\\boxed{{{a * b}}}"}
        for a in range(2, 12)
        for b in range(7)
    ]
    path = tmp_path / "products.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _play(spec, problem, completion: str) -> tuple[list[dict], float]:
    """(the episode's opening messages, the reward of `completion`) as the benchmark plays it."""

    async def play():
        env = spec.episode_task([problem]).make_env(problem)
        opening = await env.reset()
        return opening, (await env.step(completion)).reward

    return asyncio.run(play())


def test_its_problems_are_the_task_s_held_out_rows_and_never_its_training_rows(products):
    args = {"dataset": str(products), "eval_fraction": 0.2}
    task = MathTask(**args)
    problems = registry.get("math", args).load()
    assert [p.key for p in problems] == [p.key for p in task.eval_problems(len(task.held_out))]
    assert len(problems) == len(task.held_out) > 5
    assert not {p.prompt for p in problems} & {p.prompt for p in task.train}
    assert {p.answer for p in problems} <= {str(a * b) for a in range(2, 12) for b in range(7)}


def test_a_sample_is_asked_and_graded_as_the_run_s_rollouts(products):
    spec = registry.get("math", {"dataset": str(products), "eval_fraction": 0.2})
    problem = spec.load()[0]
    opening, right = _play(spec, problem, f"so \\boxed{{{problem.answer}}}")
    assert opening == [{"role": "user", "content": problem.prompt}]
    assert "Please reason step by step" in problem.prompt  # the task's prompt, as training's
    assert right == 1.0
    assert _play(spec, problem, f"\\boxed{{{int(problem.answer) + 1}}}")[1] == 0.0


def test_the_dataset_is_read_once_for_the_spec_its_rows_and_its_episodes(products, monkeypatch):
    import envs.math.tasks as math_tasks

    reads = []
    load = math_tasks.load_problems
    monkeypatch.setattr(math_tasks, "load_problems", lambda *a, **kw: reads.append(a) or load(*a, **kw))
    spec = registry.get("math", {"dataset": str(products), "eval_fraction": 0.2})
    problem = spec.load()[0]
    _play(spec, problem, "\\boxed{0}")
    assert len(reads) == 1
    # a run's next in-training evaluation: the same spec, nothing read again; other rows: read
    assert registry.get("math", {"eval_fraction": 0.2, "dataset": str(products)}) is spec
    assert len(reads) == 1
    assert registry.get("math", {"dataset": str(products), "eval_fraction": 0.3}) is not spec
    assert len(reads) == 2


def test_chat_message_prompts_and_a_system_prompt_open_the_episode_as_in_training():
    args = {
        "dataset": str(BYO / "trl_conversational.jsonl"),
        "system_prompt": "Be brief.",
        "eval_fraction": 0.5,
    }
    spec = registry.get("math", args)
    problem = spec.load()[0]
    opening, _ = _play(spec, problem, "")
    trained = MathTask(**args).make_env(problem)
    assert opening == asyncio.run(trained.reset())
    assert opening[0] == {"role": "system", "content": "Be brief."} and opening[1]["role"] == "user"


def test_it_needs_a_math_task_s_arguments_and_says_where_they_come_from(products):
    with pytest.raises(UnknownBenchmarkError, match="evaluate a run trained on one .* or name the data"):
        registry.get("math")
    with pytest.raises(BenchmarkDataError, match="benchmark 'math': .*no such file"):
        registry.get("math", {"dataset": str(products.with_name("gone.jsonl"))})
    registry.check_own_data("math", "math")
    with pytest.raises(UnknownBenchmarkError, match="this run's task is arith"):
        registry.check_own_data("math", "arith")
    registry.check_own_data("arith", "math")  # other benchmarks are any run's


def test_it_is_listed_and_suggested_but_no_sweep_can_tune_on_it():
    assert "math" not in registry.names()  # held out from training, not a tuning split
    assert "math" in [row["name"] for row in registry.describe_all()]
    with pytest.raises(UnknownBenchmarkError, match="did you mean 'math'"):
        registry.check("mat")
    assert registry.task_benchmark_name("math", {"dataset": "x.jsonl"}) == "math"


def _run_dir(tmp_path: Path, task: str, task_args: dict) -> Path:
    run = tmp_path / "run"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": task, "task_args": task_args}))
    return run


def test_bench_eval_reads_a_math_run_s_arguments_or_the_data_it_is_given(products, tmp_path):
    run = _run_dir(tmp_path, "math", {"dataset": str(products), "eval_fraction": 0.5})
    assert len(own_data_spec("math", None, run).load()) == len(
        MathTask(dataset=str(products), eval_fraction=0.5).held_out
    )
    given = own_data_spec("math", str(BYO / "trl_sums.jsonl"), run)  # --data: that dataset, its own layout
    assert sorted(p.key for p in given.load()) == sorted(
        p.key for p in MathTask(dataset=str(BYO / "trl_sums.jsonl")).held_out
    )
    other = _run_dir(tmp_path / "arith", "arith", {"max_operands": 3})
    with pytest.raises(UnknownBenchmarkError, match="name the data"):
        own_data_spec("math", None, other)
    assert [spec.name for spec in benchmark_specs(["arith", "math"], None, run, [])] == ["arith", "math"]
    with pytest.raises(UsageError, match="--bench arith has none"):
        benchmark_specs(["arith"], None, run, ["task.eval_fraction=0.2"])


def test_bench_eval_s_set_maps_the_columns_of_any_other_layout(tmp_path):
    odd = tmp_path / "odd.csv"
    odd.write_text("q,gold\n" + "".join(f"What is {a}+{a}?,{2 * a}\n" for a in range(20)))
    with pytest.raises(BenchmarkDataError, match="columns found: q, gold; set --set task.prompt_column"):
        own_data_spec("math", str(odd), None)
    spec = own_data_spec(
        "math", str(odd), None, {"prompt_column": "q", "answer_column": "gold", "eval_fraction": "0.5"}
    )
    problems = spec.load()
    assert problems and all(int(p.answer) % 2 == 0 for p in problems)
    assert len(problems) == len(
        MathTask(dataset=str(odd), prompt_column="q", answer_column="gold", eval_fraction=0.5).held_out
    )


def test_a_validation_split_is_held_out_of_training_only_when_asked_and_leaves_the_test_rows(products):
    plain = MathTask(dataset=str(products))
    tuned = MathTask(dataset=str(products), validation_fraction=0.2)
    assert plain.validation == [] and 5 < len(tuned.validation) < 25
    assert [p.key for p in tuned.held_out] == [p.key for p in plain.held_out]  # the test rows stay
    texts = {
        name: {p.prompt for p in rows} for name, rows in (("train", tuned.train), ("val", tuned.validation))
    }
    test = {p.prompt for p in tuned.held_out}
    assert not texts["train"] & texts["val"] and not texts["train"] & test and not texts["val"] & test
    assert len(tuned.train) + len(tuned.validation) == len(plain.train)
    with pytest.raises(ValueError, match="set task.validation_fraction"):
        plain.eval_problems(5, split="validation")
    with pytest.raises(ValueError, match="leaves no training problem"):
        MathTask(dataset=str(products), validation_fraction=0.999)
    spec = registry.get("math-val", {"dataset": str(products), "validation_fraction": 0.2})
    assert spec.name == "math-val" and {p.key for p in spec.load()} == {p.key for p in tuned.validation}


def test_math_val_is_a_math_run_s_tuning_split_where_it_holds_one_out(products):
    args = {"dataset": str(products), "validation_fraction": 0.1}
    assert registry.task_validation_name("math", args) == "math-val"  # a sweep's default objective
    assert registry.task_validation_name("math", {"dataset": str(products)}) is None
    registry.check_own_data("math-val", "math", args)
    with pytest.raises(UnknownBenchmarkError, match="only with task.validation_fraction set"):
        registry.check_own_data("math-val", "math", {"dataset": str(products)})
    with pytest.raises(BenchmarkDataError, match="benchmark 'math-val': .*set task.validation_fraction"):
        registry.get("math-val", {"dataset": str(products)})
