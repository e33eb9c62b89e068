"""Episode benchmarks (`BenchmarkSpec.episode_task`): played through the training loop's
episode code, graded by the env, summarised like single-turn benchmarks."""

from __future__ import annotations

import dataclasses

import pytest

from bench.eval.evaluate import evaluate
from bench.models.tiny import new_tiny_model
from benchmarks import registry as bench_registry
from envs.arith import ArithTask
from envs.base import Problem, SingleTurnEnv
from envs.math.graders import grade_integer


@pytest.fixture(scope="module")
def tiny():
    return new_tiny_model(0)


def test_single_turn_task_as_episodes_matches_the_grader_path(tiny):
    model, tokenizer = tiny
    spec = bench_registry.get("arith")
    as_episodes = dataclasses.replace(spec, grader=None, episode_task=lambda problems: ArithTask())
    greedy = {"temperature": 0.0, "max_new_tokens": 20}
    direct = evaluate(model, tokenizer, spec, k=1, limit=6, sampling=greedy, progress=False)
    episodes = evaluate(model, tokenizer, as_episodes, k=1, limit=6, sampling=greedy, progress=False)
    assert [r["completion"] for r in episodes.records] == [r["completion"] for r in direct.records]
    assert [r["correct"] for r in episodes.records] == [r["correct"] for r in direct.records]
    assert {r["grader_method"] for r in episodes.records} == {"episode"}
    assert all(r["turns"] == 1 and r["benchmark"] == "arith" for r in episodes.records)
    assert (
        episodes.summary["n_samples"] == 6
        and episodes.summary["provenance"]["episode_task"]["name"] == "arith"
    )


class _AlwaysRight(ArithTask):
    """The env ignores the model and rewards every episode: checks that the env decides."""

    def make_env(self, problem: Problem):
        return SingleTurnEnv(problem, lambda completion, answer: grade_integer(f"Answer: {answer}", answer))


def test_the_env_decides_correctness_and_k_samples_per_problem(tiny):
    model, tokenizer = tiny
    spec = dataclasses.replace(
        bench_registry.get("arith"), grader=None, episode_task=lambda problems: _AlwaysRight()
    )
    result = evaluate(model, tokenizer, spec, k=3, limit=4, sampling={"max_new_tokens": 8}, progress=False)
    assert result.summary["avg_at_k"] == 1.0 and result.summary["n_samples"] == 12
    assert sorted({(r["problem_id"], r["sample_index"]) for r in result.records}) == sorted(
        {(p.key, j) for p in result.problems for j in range(3)}
    )
    assert len({r["seed"] for r in result.records}) == 12  # per-sample seeds


@pytest.mark.parametrize("episodes", [False, True], ids=["graded", "episode-task"])
def test_a_system_prompt_opens_every_problem_and_enters_the_settings(tiny, episodes):
    """A run's `task.system_prompt` reaches its evaluation: every problem is rendered after the
    system message (the template's `<system>S\\n`, 10 characters of the tiny tokenizer), in a
    graded and in an episode benchmark alike, and the settings (the resume key) carry it."""
    from tests.unit.bench.test_chat_thinking import TEMPLATE

    model, tokenizer = tiny
    tokenizer.chat_template = TEMPLATE
    spec = bench_registry.get("arith")
    if episodes:
        spec = dataclasses.replace(spec, grader=None, episode_task=lambda problems: ArithTask())
    greedy = {"temperature": 0.0, "max_new_tokens": 4}
    try:
        plain = evaluate(model, tokenizer, spec, k=1, limit=3, sampling=greedy, progress=False)
        prompted = evaluate(
            model, tokenizer, spec, k=1, limit=3, sampling=greedy, progress=False, system_prompt="Be brief."
        )
    finally:
        tokenizer.chat_template = None
    extra = len("<system>Be brief.\n")
    assert [r["prompt_tokens"] for r in prompted.records] == [
        r["prompt_tokens"] + extra for r in plain.records
    ]
    assert prompted.summary["settings"]["system_prompt"] == "Be brief."
    assert "system_prompt" not in plain.summary["settings"]  # earlier evaluations' settings read the same
    assert prompted.summary["provenance"]["system_prompt"] == "Be brief."


def test_with_system_prompt_keeps_a_system_message_of_the_problem():
    from envs.base import with_system_prompt

    user = [{"role": "user", "content": "Q"}]
    assert with_system_prompt(user, "S") == [{"role": "system", "content": "S"}, *user]
    own = [{"role": "system", "content": "mine"}, *user]
    assert with_system_prompt(own, "S") == own
    assert with_system_prompt(user, None) == user
