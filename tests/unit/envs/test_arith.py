"""The `arith` task: problems, demonstrations, length distribution, env episodes, registry."""

import asyncio
import random
import re
from collections import Counter

import pytest

from envs import registry as task_registry
from envs.arith import SPLIT, ArithTask, evaluate, worked_solution
from envs.base import Problem, SingleTurnEnv, StepResult
from envs.math.graders import grade_integer
from envs.registry import TASKS, UnknownTaskError
from envs.splits import Split


def run_episode(task, problem, action):
    """reset + one step through asyncio, as the rollout workers will."""

    async def episode():
        env = task.make_env(problem)
        messages = await env.reset()
        return messages, await env.step(action)

    return asyncio.run(episode())


def test_problem_and_answer_are_consistent():
    task, rng = ArithTask(), random.Random(0)
    for _ in range(500):
        p = task.sample_problem(rng)
        ops, operands = p.meta["ops"], p.meta["operands"]
        assert p.prompt == f"{p.key.removeprefix('arith-')}=?\n"
        assert p.prompt.isascii() and p.prompt.endswith("=?\n")
        assert int(p.answer) == evaluate(operands, ops) == eval(p.prompt[:-3])  # digits and +/- only
        assert all(1 <= x <= 9 for x in operands) and 2 <= len(operands) <= 12


def test_worked_solution_format():
    assert worked_solution([7, 5, 3, 8], ["+", "-", "+"]) == "7+5=12\n12-3=9\n9+8=17\nAnswer: 17"
    assert grade_integer("7+5=12\n12-3=9\n9+8=17\nAnswer: 17", "17").correct


def test_clean_demonstrations_are_always_correct():
    task = ArithTask(demo_error_rate=0.0)
    demos = task.demonstrations(random.Random(1), 300)
    assert len(demos) == 300
    for *messages, reply in demos:
        completion = reply["content"]
        assert reply["role"] == "assistant"
        assert messages[-1]["role"] == "user" and messages[-1]["content"].endswith("=?\n")
        answer = str(eval(messages[-1]["content"][:-3]))
        problem = Problem(key="k", prompt=messages[-1]["content"], answer=answer)
        _, result = run_episode(task, problem, completion)
        assert result.reward == 1.0 and result.info["correct"], completion
        assert len(completion) <= 160


def _demo_correct_rate(task, n, seed):
    demos = task.demonstrations(random.Random(seed), n)
    ok = 0
    for *messages, reply in demos:
        completion = reply["content"]
        answer = str(eval(messages[-1]["content"][:-3]))
        ok += grade_integer(completion, answer).correct
    return ok / n, demos


def test_noisy_demonstrations_single_step_error_rate():
    # with two operands there is one step, so the wrong rate is the error rate itself
    rate, _ = _demo_correct_rate(ArithTask(demo_error_rate=0.15, max_operands=2), 2000, seed=2)
    assert abs((1 - rate) - 0.15) < 0.03


def test_noisy_demonstrations_errors_propagate():
    task = ArithTask()  # defaults: error rate 0.15, demonstrations' operand mix demo_p_more 0.15
    rate, demos = _demo_correct_rate(task, 2000, seed=3)
    # every step must be right (up to rare cancellations): about E[0.85 ** steps] ~ 0.47
    assert 0.42 < rate < 0.53, rate
    # an erroneous step is off by 1 or 2, and the next line continues from the wrong value
    bad_steps = 0
    for _, reply in demos:
        lines = reply["content"].split("\n")
        for line, nxt in zip(lines[:-1], lines[1:]):
            lhs, shown = line.split("=")
            true = eval(lhs)
            assert abs(int(shown) - true) <= 2
            bad_steps += int(shown) != true
            assert nxt == f"Answer: {shown}" or re.match(rf"{re.escape(shown)}[+-][1-9]=", nxt), nxt
    assert bad_steps > 0


def test_length_distribution_is_heavy_tailed():
    task, rng = ArithTask(), random.Random(4)
    counts = Counter(task.sample_problem(rng).meta["n_operands"] for _ in range(2000))
    assert 0.30 < counts[2] / 2000 < 0.40  # P(2 operands) = p_more = 0.35
    assert sum(c for n, c in counts.items() if n >= 8) >= 50  # expected ~150 (7.5%)
    assert counts[12] > 0 and max(counts) == 12
    lengths = [len(reply["content"]) for _, reply in task.demonstrations(random.Random(5), 500)]
    assert max(lengths) >= 4 * min(lengths)


def test_demonstrations_use_their_own_operand_mix():
    task = ArithTask(demo_error_rate=0.0, p_more=0.35, demo_p_more=0.15)
    demos = task.demonstrations(random.Random(6), 4000)
    n_operands = Counter(len(re.findall(r"[1-9]", prompt["content"])) for prompt, _ in demos)
    assert 0.13 < n_operands[2] / 4000 < 0.17  # P(2 operands) = demo_p_more
    assert 0.49 < sum(c for n, c in n_operands.items() if n >= 6) / 4000 < 0.55  # 0.85^4 = 0.52
    rng = random.Random(7)
    problems = Counter(task.sample_problem(rng).meta["n_operands"] for _ in range(4000))
    assert 0.32 < problems[2] / 4000 < 0.38  # training and eval problems keep p_more
    with pytest.raises(ValueError, match="demo_p_more"):
        ArithTask(demo_p_more=0.0)


def test_env_reset_and_step():
    task = ArithTask()
    problem = task.eval_problems(1)[0]
    messages, result = run_episode(task, problem, f"work\nAnswer: {problem.answer}")
    assert messages == [{"role": "user", "content": problem.prompt}]
    assert isinstance(result, StepResult) and result.done and result.observation is None
    assert result.reward == 1.0 and result.info == {
        "correct": True,
        "extracted": problem.answer,
        "method": "integer",
    }
    _, wrong = run_episode(task, problem, f"Answer: {int(problem.answer) + 1}")
    assert wrong.reward == 0.0 and not wrong.info["correct"]
    _, missing = run_episode(task, problem, "7+5=12")
    assert missing.reward == 0.0 and missing.info["method"] == "no-answer"


def test_env_cannot_step_twice():
    async def episode():
        env = SingleTurnEnv(Problem("k", "1+1=?\n", "2"), grade_integer)
        await env.reset()
        await env.step("Answer: 2")
        await env.step("Answer: 2")

    with pytest.raises(RuntimeError, match="already done"):
        asyncio.run(episode())


def test_eval_problems_are_deterministic_and_separate():
    task = ArithTask()
    a, b = task.eval_problems(50, seed=0), task.eval_problems(50, seed=0)
    assert a == b and len({p.key for p in a}) == 50
    assert task.eval_problems(20, seed=0) == a[:20]
    assert [p.prompt for p in task.eval_problems(50, seed=1)] != [p.prompt for p in a]
    train = [task.sample_problem(random.Random(0)) for _ in range(1)]
    assert all(p.key.startswith("arith-eval0-") for p in a) and not train[0].key.startswith("arith-eval")


def test_constructor_validation():
    with pytest.raises(ValueError):
        ArithTask(demo_error_rate=1.5)
    with pytest.raises(ValueError):
        ArithTask(max_operands=1)
    with pytest.raises(ValueError):
        ArithTask(p_more=0.0)


def test_registry():
    assert TASKS["arith"] == "envs.arith:ArithTask"
    assert "arith" in task_registry.summaries() and task_registry.summaries()["arith"] == ArithTask.summary
    task = task_registry.make("arith", demo_error_rate=0.0)
    assert isinstance(task, ArithTask) and task.demo_error_rate == 0.0
    assert task.name == "arith" and task.max_new_tokens == 160 and task.stop == () and task.max_turns == 1
    with pytest.raises(UnknownTaskError) as err:
        task_registry.make("arth")
    assert (
        str(err.value)
        == f"unknown task 'arth'; did you mean 'arith'? available: {', '.join(sorted(TASKS))}, rg:<name>"
    )
    assert isinstance(err.value, ValueError)
    with pytest.raises(UnknownTaskError) as err:
        task_registry.make("zzz")
    assert str(err.value) == f"unknown task 'zzz'; available: {', '.join(sorted(TASKS))}, rg:<name>"
    with pytest.raises(UnknownTaskError, match=r"^task 'arith': .*unexpected keyword argument 'bogus'"):
        task_registry.make("arith", bogus=1)


def test_a_long_training_stream_never_draws_a_held_out_chain():
    # 32,000 draws: a 500-step run of 64 trajectories (before the split, 101 of 200 test chains
    # and 117 of 200 validation chains occurred in such a stream)
    task = ArithTask()
    rng = random.Random(0)
    trained = {task.sample_problem(rng).prompt for _ in range(32_000)}
    test = {p.prompt for p in task.eval_problems(1000)}
    validation = {p.prompt for p in task.eval_problems(200, split=Split.VALIDATION)}
    assert not trained & test and not trained & validation and not test & validation
    assert len(trained) > 5000 and len(test) > 500 and len(validation) > 100
    assert {SPLIT.of(p.removesuffix("=?\n")) for p in trained} == {Split.TRAIN}


def test_held_out_sets_keep_the_task_s_mix_of_lengths():
    # lengths come from the task's mix (P(2 operands) = 0.35), whatever a bucket's share of a
    # length: rejecting whole draws would give 39% (39 of the 162 two-operand chains are test
    # chains), deduplicating about 6% (SE of the share below: 0.003)
    task = ArithTask()
    for split in (Split.TEST, Split.VALIDATION):
        counts = Counter(p.meta["n_operands"] for p in task.eval_problems(20_000, split=split))
        assert abs(counts[2] / 20_000 - 0.35) < 0.01 and abs(counts[3] / 20_000 - 0.35 * 0.65) < 0.01
    trained = Counter(task.sample_problem(random.Random(i)).meta["n_operands"] for i in range(20_000))
    assert abs(trained[2] / 20_000 - 0.35) < 0.01
    with pytest.raises(ValueError, match="unknown held-out split 'train'; choose one of test, validation"):
        ArithTask().eval_problems(5, split="train")


@pytest.mark.parametrize("task", [ArithTask(), task_registry.make("drift")], ids=["arith", "drift"])
def test_no_demonstration_is_a_test_or_validation_chain(task):
    # the base checkpoints are cloned from these: a held-out chain among them would be seen in
    # warm-start (demonstrations_version 1 drew from the whole space: 30% of them were held out)
    demos = task.demonstrations(random.Random(0), 3000)
    chains = [demo[0]["content"].removesuffix("=?\n") for demo in demos]
    assert {SPLIT.of(chain) for chain in chains} == {Split.TRAIN}
    test = {p.prompt for p in ArithTask().eval_problems(1000)}
    validation = {p.prompt for p in ArithTask().eval_problems(200, split=Split.VALIDATION)}
    assert not {demo[0]["content"] for demo in demos} & (test | validation)
    assert task.demonstrations_version == 2


def test_last_number_grading_is_asked_for_and_bounded_against_an_echo_of_the_prompt():
    """`grading="last-number"` scores `7 + 5 = 12` where the default needs a marked answer; an
    echo of the prompt (`6-3=?`) scores only where the answer equals the last operand: a few
    per cent of short chains, which the task's docstring states."""
    problem = ArithTask().eval_problems(1)[0]
    plain = problem.prompt.removesuffix("=?\n") + f" = {problem.answer}"
    assert not run_episode(ArithTask(), problem, plain)[1].reward
    assert run_episode(ArithTask(grading="last-number"), problem, plain)[1].reward == 1.0
    task = ArithTask(grading="last-number", max_operands=3)
    problems = task.eval_problems(2000)
    echoed = [p for p in problems if task.grader(p.prompt, p.answer).correct]
    assert 0.01 < len(echoed) / len(problems) < 0.05
    assert all(p.answer == str(p.meta["operands"][-1]) for p in echoed)
    with pytest.raises(ValueError, match="grading: invalid value 'loose'; valid: marked, last-number"):
        ArithTask(grading="loose")


def test_a_config_that_changes_the_held_out_chains_has_a_benchmark_of_its_own():
    from benchmarks import registry as benchmarks

    assert ArithTask.benchmark_name({"demo_error_rate": 0.0, "max_operands": 12}) == "arith"
    name = ArithTask.benchmark_name({"max_operands": 3, "grading": "last-number", "demo_error_rate": 0.0})
    assert name == "arith@grading=last-number@max_operands=3"
    assert benchmarks.task_benchmark_name("arith", {"max_operands": 3, "grading": "last-number"}) == name
    spec = benchmarks.get(name)
    task = ArithTask(max_operands=3, grading="last-number")
    assert spec.load(limit=50) == task.eval_problems(50)
    assert spec.grader is task.grader
    assert benchmarks.get("arith").load(limit=50) != spec.load(limit=50)
    with pytest.raises(
        benchmarks.UnknownBenchmarkError, match="valid fields: grading, max_operands, p_more, prompt_format"
    ):
        benchmarks.check("arith@demo_error_rate=0.1")


def test_a_system_prompt_opens_every_episode():
    task = ArithTask(system_prompt="Reply with the number.")
    messages = asyncio.run(task.make_env(task.sample_problem(random.Random(0))).reset())
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == "Reply with the number."
    plain = asyncio.run(ArithTask().make_env(task.sample_problem(random.Random(0))).reset())
    assert [m["role"] for m in plain] == ["user"] and ArithTask(system_prompt="").system_prompt is None


def test_the_question_form_asks_the_same_chains_in_words():
    """`prompt_format="question"`: the same chains (keys, answers, splits) asked as `What is 7 + 5
    - 3?`; its own benchmark name; an echo of the question leaks as the equation's does."""
    from benchmarks import registry as benchmarks

    equation, question = ArithTask(max_operands=3), ArithTask(max_operands=3, prompt_format="question")
    for a, b in zip(equation.eval_problems(20), question.eval_problems(20), strict=True):
        assert (a.key, a.answer, a.meta) == (b.key, b.answer, b.meta)
        assert (
            b.prompt
            == "What is " + a.prompt.removesuffix("=?\n").replace("+", " + ").replace("-", " - ") + "?"
        )
    assert question.eval_problems(1)[0].prompt.startswith("What is ")
    name = ArithTask.benchmark_name({"prompt_format": "question", "grading": "last-number"})
    assert name == "arith@grading=last-number@prompt_format=question"
    assert benchmarks.get(name).load(limit=5) == ArithTask(prompt_format="question").eval_problems(5)
    assert ArithTask.benchmark_name({"prompt_format": "equation"}) == "arith"
    graded = ArithTask(grading="last-number", max_operands=3, prompt_format="question")
    problems = graded.eval_problems(2000)
    echoed = [p for p in problems if graded.grader(p.prompt, p.answer).correct]
    assert 0.01 < len(echoed) / len(problems) < 0.05
    with pytest.raises(ValueError, match="prompt_format: invalid value 'words'; valid: equation, question"):
        ArithTask(prompt_format="words")
