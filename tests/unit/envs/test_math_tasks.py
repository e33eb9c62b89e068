"""Tests for the `math` task (envs/math/tasks.py), its Python tool (envs/math/python_tool.py)
and the sandbox test-file overhead probe (envs/sandbox/perf.py).

Tool episodes run real sandboxed programs with a 1-CPU-second limit, so the infinite loop
costs about one second.
"""

from __future__ import annotations

import asyncio
import csv
import json
import random
import time
from pathlib import Path

import pytest

from envs import registry as task_registry
from envs.base import SingleTurnEnv
from envs.math.graders import grade_gsm8k, grade_symbolic
from envs.math.python_tool import MathToolEnv, strip_code_fence, truncate_middle
from envs.math.tasks import INSTRUCTION, MISSING_DATA, MathTask, split_position
from envs.registry import UnknownTaskError
from envs.sandbox.perf import measure_test_file_overhead

GSM8K = "gsm8k/test.jsonl"  # real benchmark data (`benchmark_data` fixture: full copy or sample)


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    """Write a CSV file with `header` and `rows`; returns `path`."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def gsm8k_rows(benchmark_data) -> int:
    return benchmark_data(GSM8K).rows


@pytest.fixture(scope="module")
def gsm8k(benchmark_data) -> MathTask:
    return MathTask(data=str(benchmark_data(GSM8K).path))


@pytest.fixture
def tool_task(tmp_path: Path) -> MathTask:
    """A Python-tool task on two integer problems; 1 CPU second per call, at most 2 calls."""
    data = write_csv(
        tmp_path / "d.csv", ["problem", "answer"], [["What is 6*7?", "42"], ["What is 2+2?", "4"]]
    )
    return MathTask(data=str(data), tools="python", max_tool_calls=2, python_cpu_seconds=1)


def run(coro):
    return asyncio.run(coro)


# ----------------------------------------------------------------------------- loading


def test_gsm8k_schema_detected(gsm8k: MathTask, gsm8k_rows: int) -> None:
    assert gsm8k.grader_name == "gsm8k" and gsm8k.grader is grade_gsm8k
    everything = sorted(gsm8k.train + gsm8k.held_out, key=lambda p: p.key)
    assert len(everything) == gsm8k_rows
    first = everything[0]  # Janet's ducks: the solution ends with "#### 18"
    assert first.key == "math-00000" and first.answer == "18"
    assert first.prompt.startswith("Janet\u2019s ducks lay 16 eggs per day.")
    assert first.prompt.endswith("farmers' market?\n\n" + INSTRUCTION)
    assert first.meta["solution"].endswith("#### 18")
    assert (gsm8k.stop, gsm8k.max_turns, gsm8k.default_runtime) == ((), 1, "none")
    env = gsm8k.make_env(first)
    assert isinstance(env, SingleTurnEnv)
    assert run(env.reset()) == [{"role": "user", "content": first.prompt}]
    assert run(env.step("9 eggs at $2 each: \\boxed{18}")).reward == 1.0


def test_csv_with_expressions_is_symbolic(tmp_path: Path) -> None:
    data = write_csv(
        tmp_path / "p.csv",
        ["problem", "answer"],
        [["Half of one?", "$\\frac{1}{2}$"], ["Smallest prime?", "2"], ["Roots of x^2-3x+2?", "1, 2"]],
    )
    task = MathTask(data=str(data))
    assert task.grader_name == "symbolic" and task.grader is grade_symbolic
    half = next(p for p in task.train + task.held_out if p.meta["problem"] == "Half of one?")
    assert half.answer == "$\\frac{1}{2}$"
    env = task.make_env(half)
    assert run(env.step("so \\boxed{\\dfrac{1}{2}}")).reward == 1.0
    assert run(task.make_env(half).step("\\boxed{\\frac{1}{3}}")).reward == 0.0


def test_integer_answers_and_other_schemas(tmp_path: Path) -> None:
    # IMOAnswerBench headers (case-insensitive, "Short Answer"); all answers integers -> integer.
    imo = write_csv(
        tmp_path / "imo.csv",
        ["Problem ID", "Problem", "Short Answer"],
        [["a", "P1", "042"], ["b", "P2", "7"]],
    )
    assert MathTask(data=str(imo)).grader_name == "integer"
    rows = [{"problem": "P1", "answer": 3}, {"problem": "P2", "answer": "1/2"}]
    (tmp_path / "d.json").write_text(json.dumps(rows))
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    for name in ("d.json", "d.jsonl"):
        task = MathTask(data=str(tmp_path / name))
        assert task.grader_name == "symbolic"
        assert sorted(p.answer for p in task.train + task.held_out) == ["1/2", "3"]


# ----------------------------------------------------------------------------- split


def test_train_and_eval_are_disjoint(gsm8k: MathTask, gsm8k_rows: int) -> None:
    train_keys = {p.key for p in gsm8k.train}
    held_keys = {p.key for p in gsm8k.held_out}
    assert not train_keys & held_keys and len(train_keys | held_keys) == gsm8k_rows
    assert not {p.meta["problem"] for p in gsm8k.train} & {p.meta["problem"] for p in gsm8k.held_out}
    # eval_fraction 0.1 of hashed positions: within three binomial standard deviations of 0.1 n
    # (1319 rows: 138 held out, band 99-165; the 51-row sample: 8, band 0-11)
    assert abs(len(held_keys) - 0.1 * gsm8k_rows) <= 3 * (gsm8k_rows * 0.1 * 0.9) ** 0.5
    assert all(split_position(p.meta["problem"]) < 0.1 for p in gsm8k.held_out)
    rng = random.Random(0)
    assert all(gsm8k.sample_problem(rng).key in train_keys for _ in range(2000))
    assert {p.key for p in gsm8k.eval_problems(10_000, seed=1)} == held_keys  # n too large: all of them


def test_split_depends_on_text_only(tmp_path: Path) -> None:
    rows = [[f"Problem number {i}", str(i)] for i in range(40)]
    a = MathTask(data=str(write_csv(tmp_path / "a.csv", ["problem", "answer"], rows)), eval_fraction=0.3)
    b = MathTask(
        data=str(write_csv(tmp_path / "b.csv", ["question", "answer"], rows[::-1])), eval_fraction=0.3
    )
    assert {p.meta["problem"] for p in a.held_out} == {p.meta["problem"] for p in b.held_out}


def test_both_sides_non_empty_and_duplicates_together(tmp_path: Path) -> None:
    rows = [["alpha", "1"], ["beta", "2"], ["alpha", "1"]]
    data = str(write_csv(tmp_path / "d.csv", ["problem", "answer"], rows))
    low, high = sorted(["alpha", "beta"], key=split_position)
    tiny = MathTask(data=data, eval_fraction=1e-9)  # nothing below the fraction: the lowest moves to eval
    assert [p.meta["problem"] for p in tiny.held_out] == [low] * (2 if low == "alpha" else 1)
    huge = MathTask(data=data, eval_fraction=1 - 1e-9)  # everything below: the highest trains
    assert [p.meta["problem"] for p in huge.train] == [high] * (2 if high == "alpha" else 1)
    with pytest.raises(ValueError, match="two distinct problems"):
        MathTask(data=str(write_csv(tmp_path / "one.csv", ["problem", "answer"], [["x", "1"], ["x", "1"]])))


def test_deterministic(gsm8k: MathTask, benchmark_data) -> None:
    again = MathTask(data=str(benchmark_data(GSM8K).path))
    assert [p.key for p in gsm8k.eval_problems(20, seed=3)] == [
        p.key for p in again.eval_problems(20, seed=3)
    ]
    assert gsm8k.eval_problems(20, seed=3) != gsm8k.eval_problems(20, seed=4)
    r1, r2 = random.Random(7), random.Random(7)
    assert [gsm8k.sample_problem(r1).key for _ in range(50)] == [
        again.sample_problem(r2).key for _ in range(50)
    ]


# ----------------------------------------------------------------------------- tool episodes


def test_tool_episode_right_answer(tool_task: MathTask) -> None:
    assert (tool_task.stop, tool_task.max_turns, MathTask.stop) == (("</tool>",), 3, ())
    problem = next(p for p in tool_task.train + tool_task.held_out if p.answer == "42")

    async def episode():
        env = tool_task.make_env(problem)
        assert isinstance(env, MathToolEnv)
        system, user = await env.reset()
        assert "<tool>python" in system["content"] and "at most 2 times" in system["content"]
        assert user == {"role": "user", "content": problem.prompt}
        first = await env.step("Let me compute. <tool>python print(6*7)</tool>")
        workdir = env.python.sandbox.workdir
        assert workdir.is_dir()
        final = await env.step("So the answer is \\boxed{42}.")
        await env.close()
        # Checked while `env` is alive: garbage collection would also remove the directory.
        assert not workdir.exists()
        return first, final

    first, final = run(episode())
    assert (first.observation, first.reward, first.done) == ("<result>42</result>\n", 0.0, False)
    assert (final.reward, final.done, final.info["correct"], final.info["tool_calls"]) == (1.0, True, True, 1)


def test_tool_errors_limits_and_wrong_answer(tool_task: MathTask) -> None:
    problem = next(p for p in tool_task.train + tool_task.held_out if p.answer == "42")

    async def episode():
        env = tool_task.make_env(problem)
        await env.reset()
        raised = await env.step("<tool>python\nx = 1\nraise ValueError('boom')\n</tool>")
        t0 = time.monotonic()
        looped = await env.step("<tool>python\nwhile True:\n    pass\n</tool>")
        seconds = time.monotonic() - t0
        final = await env.step("\\boxed{41}")
        await env.close()
        return raised, looped, seconds, final

    raised, looped, seconds, final = run(episode())
    assert raised.observation.startswith(
        '<result>[stderr]\nTraceback (most recent call last):\n  File "snippet.py"'
    )
    assert raised.observation.endswith("ValueError: boom\n[exit code 1]</result>\n") and not raised.done
    assert looped.observation == (
        "<result>[killed by signal SIGXCPU]\n[sandbox: cpu time limit (1 s) exceeded]</result>\n"
    )
    assert seconds < 4 + 5  # the 1 s CPU limit (wall limit 4 s) stopped it, with slack for a busy machine
    assert (final.reward, final.done, final.info["correct"], final.info["extracted"]) == (
        0.0,
        True,
        False,
        "41",
    )


def test_too_many_tool_calls_end_with_zero(tool_task: MathTask) -> None:
    problem = tool_task.train[0]

    async def episode():
        env = tool_task.make_env(problem)
        await env.reset()
        steps = [await env.step(f"<tool>python\n```python\nprint({i}**10)\n```\n</tool>") for i in (2, 3, 4)]
        await env.close()
        return steps

    first, second, third = run(episode())
    assert (first.observation, second.observation) == ("<result>1024</result>\n", "<result>59049</result>\n")
    assert (third.done, third.reward, third.info["stopped"]) == (True, 0.0, "more than 2 tool calls")


def test_close_without_tool_call_is_a_no_op(tool_task: MathTask) -> None:
    env = tool_task.make_env(tool_task.train[0])
    run(env.close())
    assert env.python.sandbox is None


def test_observation_helpers() -> None:
    assert strip_code_fence("```python\nprint(1)\n```") == "print(1)"
    assert strip_code_fence("  ```\na = 1\nprint(a)```  ") == "a = 1\nprint(a)"
    assert strip_code_fence("print('```')") == "print('```')"
    assert truncate_middle("abc", 100) == "abc"
    # 100 chars, 60 allowed: keep 60 - 40 = 20, i.e. 10 of head and 10 of tail; 80 cut.
    assert truncate_middle("abcdefghij" * 10, 60) == "abcdefghij\n[... 80 chars cut ...]\nabcdefghij"


# ----------------------------------------------------------------------------- arguments


def test_missing_data_message() -> None:
    with pytest.raises(ValueError) as info:
        MathTask()
    assert str(info.value) == MISSING_DATA
    assert MISSING_DATA.startswith("task 'math' needs --set task.dataset=NAME_OR_PATH")
    with pytest.raises(UnknownTaskError, match="needs --set task.dataset=NAME_OR_PATH"):
        task_registry.make("math")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"grader": "exact"}, "grader must be one of auto, integer, gsm8k, symbolic; got 'exact'"),
        ({"tools": "bash"}, "tools must be one of none, python; got 'bash'"),
        ({"max_tool_calls": 0}, "max_tool_calls must be an integer in [1, 1000]; got 0"),
        ({"max_tool_calls": 2.5}, "max_tool_calls must be an integer in [1, 1000]; got 2.5"),
        ({"eval_fraction": 1.5}, "eval_fraction must be a number in"),
        ({"grader": "integer"}, "grader='integer' but row 1 of"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    data = write_csv(tmp_path / "d.csv", ["problem", "answer"], [["P1", "3"], ["P2", "x+1"]])
    with pytest.raises(ValueError) as info:
        MathTask(data=str(data), **kwargs)
    assert message in str(info.value)
    with pytest.raises(UnknownTaskError, match=message.replace("[", r"\[").replace("(", r"\(")):
        task_registry.make("math", data=str(data), **kwargs)


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no such file"):
        MathTask(data=str(tmp_path / "missing.jsonl"))
    with pytest.raises(ValueError, match="unsupported extension '.txt'; use one of .csv, .json"):
        MathTask(data=str(tmp_path / "d.txt"))
    no_answer = write_csv(tmp_path / "n.csv", ["problem", "result"], [["P1", "3"]])
    with pytest.raises(
        ValueError,
        match="no answer column recognised .one of answer, short answer, solution, .*; columns found: "
        "problem, result; set --set task.answer_column=NAME",
    ):
        MathTask(data=str(no_answer))


def test_registered_and_no_demonstrations(gsm8k: MathTask) -> None:
    assert task_registry.get("math") is MathTask
    with pytest.raises(NotImplementedError, match="--model PATH"):
        gsm8k.demonstrations(random.Random(0), 1)


# ----------------------------------------------------------------------------- sandbox perf


def test_measure_test_file_overhead() -> None:
    stats = measure_test_file_overhead(n=3)
    assert set(stats) == {"n", "plain_median_s", "sandbox_median_s", "overhead_s"} and stats["n"] == 3
    assert stats["plain_median_s"] > 0 and stats["sandbox_median_s"] > 0
    assert stats["overhead_s"] == pytest.approx(stats["sandbox_median_s"] - stats["plain_median_s"])
