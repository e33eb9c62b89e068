"""`rg:<dataset>` tasks (envs/reasoning_gym.py) and their benchmarks: any reasoning-gym dataset
by name with its config, graded by its own verifier after any thinking, training and held-out
problems disjoint (tested on a space small enough that seeds repeat questions)."""

from __future__ import annotations

import asyncio
import random

import pytest

from envs import registry
from envs.registry import UnknownTaskError

pytest.importorskip("reasoning_gym")

SMALL = {"min_terms": 2, "max_terms": 2, "max_digits": 1, "allow_parentheses": False, "allow_negation": False}
"""basic_arithmetic with two one-digit terms: a few hundred distinct questions in all."""


def test_training_never_draws_a_held_out_question_in_a_small_space():
    task = registry.make("rg:basic_arithmetic", **SMALL)
    rng = random.Random(0)
    trained = {task.sample_problem(rng).meta["question"] for _ in range(3000)}
    test = {p.meta["question"] for p in task.eval_problems(30, split="test")}
    validation = {p.meta["question"] for p in task.eval_problems(30, split="validation")}
    assert len(test) == 30 and len(validation) == 30
    assert not trained & test and not trained & validation and not test & validation
    # without the content split the seed streams alone would collide here: the evaluation
    # stream repeats questions the training stream drew
    import reasoning_gym

    stream = reasoning_gym.create_dataset("basic_arithmetic", seed=10**9, size=200, **SMALL)
    assert {stream[i]["question"] for i in range(200)} & trained


def test_eval_problems_are_fixed_by_n_seed_and_split():
    task = registry.make("rg:chain_sum")
    first = [p.key for p in task.eval_problems(5, seed=0)]
    assert first == [p.key for p in registry.make("rg:chain_sum").eval_problems(5, seed=0)]
    assert first != [p.key for p in task.eval_problems(5, seed=1)]


@pytest.mark.parametrize(
    "completion, reward",
    [
        ("<answer>{a}</answer>", 1.0),
        ("<think><answer>{a}</answer></think> no answer after the thought", 0.0),
        ("<think>hmm</think><answer>{a}</answer>", 1.0),
        ("{a}", 0.0),  # no answer tags
        ("<answer>{a}1</answer>", "partial"),  # the verifier's own partial credit, below 1
    ],
)
def test_the_datasets_verifier_grades_after_the_thinking(completion, reward):
    task = registry.make("rg:basic_arithmetic", **SMALL)
    problem = task.sample_problem(random.Random(1))
    env = task.make_env(problem)
    asyncio.run(env.reset())
    result = asyncio.run(env.step(completion.format(a=problem.answer)))
    if reward == "partial":
        assert 0 <= result.reward < 1 and not result.info["correct"]
    else:
        assert result.reward == reward and result.info["correct"] is (reward == 1.0)


def test_bad_names_and_fields_are_one_line_with_the_valid_choices():
    with pytest.raises(UnknownTaskError, match="did you mean 'rg:chain_sum'\\? available: ab, acre"):
        registry.make("rg:chain_sun")
    with pytest.raises(
        UnknownTaskError, match="task.max_term: not a config field .*did you mean 'max_terms'"
    ):
        registry.make("rg:basic_arithmetic", max_term=2)
    with pytest.raises(UnknownTaskError, match="unknown task 'rg:'"):
        registry.check("rg:")


def test_registered_benchmarks_pin_the_generator_and_play_as_the_task():
    from benchmarks import registry as benchmarks

    spec = benchmarks.get("rg:basic_arithmetic")
    assert "reasoning-gym==0.1.25" in spec.source.describe() and spec.version == 1
    problems = spec.load(limit=3)
    held_out = registry.make("rg:basic_arithmetic").eval_problems(3)
    assert [p.key for p in problems] == [p.key for p in held_out]
    assert registry.get("rg:basic_arithmetic").benchmark_name({}) == "rg:basic_arithmetic"
