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


@pytest.mark.parametrize(
    ("config", "name"),
    [
        ({}, "rg:chain_sum"),
        ({"max_terms": 2, "max_digits": 1}, "rg:chain_sum@max_digits=1@max_terms=2"),
        ({"allow_negation": False, "size": 50}, "rg:chain_sum@allow_negation=false"),
        ({"max_value": 0.5}, "rg:chain_sum@max_value=0.5"),
        ({"style": "plain"}, "rg:chain_sum@style=plain"),
        # what a name cannot carry: a list, a string that reads as a number or has a space
        ({"operators": ["+", "-"]}, "rg:chain_sum@custom"),
        ({"style": "12"}, "rg:chain_sum@custom"),
        ({"style": "a b"}, "rg:chain_sum@custom"),
        ({"system_prompt": "Be brief."}, "rg:chain_sum@custom"),
    ],
)
def test_a_config_has_a_benchmark_name_that_reads_back_as_that_config(config, name):
    from envs.config_names import parse_config_name

    assert registry.get("rg:chain_sum").benchmark_name(config) == name
    if not name.endswith("@custom"):
        expected = {k: v for k, v in config.items() if k != "size"}
        parsed = parse_config_name(name)
        assert parsed == ("rg:chain_sum", expected)
        assert [type(v) for v in parsed[1].values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("rg:chain_sum@max_terms=2@max_digits=1", "write it as rg:chain_sum@max_digits=1@max_terms=2"),
        ("rg:chain_sum@", "write each setting once as @field=value"),
        ("rg:chain_sum@max_terms", "write each setting once as @field=value"),
        ("rg:chain_sum@max_terms=2@max_terms=3", "write each setting once"),
        ("rg:chain_sum@max_term=2", "did you mean 'max_terms'"),
        ("rg:chain_sum@max_terms=0", "max_terms must be >= min_terms"),
        ("rg:chain_sun@max_terms=2", "did you mean 'rg:chain_sum'"),
    ],
)
def test_a_bad_benchmark_name_is_one_line_naming_the_fix(name, message):
    from benchmarks import registry as benchmarks

    with pytest.raises(benchmarks.UnknownBenchmarkError, match=message) as caught:
        benchmarks.check(name)
    assert "\n" not in str(caught.value)


def test_a_configured_benchmark_holds_out_that_configs_problems_and_plays_as_its_task():
    """The benchmark a run at an easy config is evaluated on: the held-out problems of that config
    (not the default config's), played as an episode of the task at that config."""
    from benchmarks import registry as benchmarks

    name = benchmarks.task_benchmark_name("rg:basic_arithmetic", {**SMALL, "size": 500})
    assert name == (
        "rg:basic_arithmetic@allow_negation=false@allow_parentheses=false@max_digits=1@max_terms=2@min_terms=2"
    )
    spec = benchmarks.get(name)
    assert spec.name == name and "max_digits=1" in spec.source.describe()
    problems = spec.load(limit=5)
    task = registry.make("rg:basic_arithmetic", **SMALL)
    assert [p.prompt for p in problems] == [p.prompt for p in task.eval_problems(5)]
    assert [p.prompt for p in problems] != [
        p.prompt for p in registry.make("rg:basic_arithmetic").eval_problems(5)
    ]
    played = spec.episode_task(problems)
    assert played.config == SMALL
    env = played.make_env(problems[0])
    asyncio.run(env.reset())
    result = asyncio.run(env.step(f"<answer>{problems[0].answer}</answer>"))
    assert result.reward == 1.0
    # a run of another dataset, or of a config with a list value, has no benchmark of its own
    assert benchmarks.task_benchmark_name("rg:gcd", {"max_value": 50}) == "rg:gcd@max_value=50"
    assert benchmarks.task_benchmark_name("rg:basic_arithmetic", {"operators": ["+"]}) is None
