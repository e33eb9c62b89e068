"""Online drift: the phase schedule, per-phase grading and metrics, and the `drift` example."""

import asyncio
import random

import pytest

from bench.models.recipes import recipe_for
from bench.rollout.episode import Trajectory
from bench.rollout.producer import Group
from bench.train.metrics import batch_metrics
from envs import registry as task_registry
from envs.agent import AgentTask
from envs.arith import ArithTask
from envs.online import (
    DriftingTask,
    DriftTask,
    LabelledArithTask,
    Phase,
    grade_either_label,
    label_phase,
    last_label,
)
from envs.splits import Split


def episode(task, problem, actions):
    """reset, then the actions until the episode ends; returns (initial messages, last result)."""

    async def go():
        env = task.make_env(problem)
        messages = await env.reset()
        for action in actions:
            result = await env.step(action)
            if result.done:
                break
        await env.close()
        return messages, result

    return asyncio.run(go())


def test_schedule_cycles_by_trajectories():
    task = DriftTask(phase_every=3)  # one rollout per problem until the loop says otherwise
    rng = random.Random(0)
    problems = [task.sample_problem(rng) for _ in range(14)]
    assert [p.meta["phase"] for p in problems] == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0]
    assert [p.meta["draw"] for p in problems] == list(range(14))
    assert task.drawn == 14

    # groups of 4: trajectories 0-3, 4-7, ... so a 12-trajectory phase holds 3 problems; a
    # group straddling a boundary (problem 2 of 8-per-phase: trajectories 8-11) takes the phase
    # of its first trajectory
    grouped = DriftTask(phase_every=12)
    grouped.begin_training(4)
    assert [grouped.sample_problem(rng).meta["phase"] for _ in range(8)] == [0, 0, 0, 1, 1, 1, 0, 0]
    uneven = DriftTask(phase_every=10)
    uneven.begin_training(4)
    assert [uneven.phase_of(i) for i in range(6)] == [0, 0, 0, 1, 1, 0]  # first trajectories 0,4,8,12,16,20
    with pytest.raises(ValueError, match="rollouts per problem must be >= 1"):
        uneven.begin_training(0)


def test_a_resumed_schedule_continues_from_the_trajectories_done():
    task = DriftTask(phase_every=12)
    task.begin_training(4, trajectories_done=24)  # 6 problems of 4 done: phases 0, 0, 0, 1, 1, 1
    assert task.drawn == 6
    assert [task.sample_problem(random.Random(0)).meta["draw"] for _ in range(2)] == [6, 7]
    assert task.phase_of(6) == 0 and task.phase_of(9) == 1
    task.begin_training(4, trajectories_done=25)  # a partial problem rounds up
    assert task.drawn == 7
    with pytest.raises(ValueError, match="trajectories_done must be >= 0"):
        task.begin_training(1, trajectories_done=-1)


def test_schedule_without_cycling_stays_in_the_last_phase():
    phases = [Phase("p0", bool), Phase("p1", bool), Phase("p2", bool)]
    task = DriftingTask(ArithTask(), phases, phase_every=2, cycle=False)
    assert [task.phase_of(i) for i in range(9)] == [0, 0, 1, 1, 2, 2, 2, 2, 2]
    cycling = DriftingTask(ArithTask(), phases, phase_every=2)
    assert [cycling.phase_of(i) for i in range(9)] == [0, 0, 1, 1, 2, 2, 0, 0, 1]


def test_prompts_and_keys_do_not_reveal_the_phase():
    # the same rng stream gives the same base problems whatever the phase they land in
    plain = [ArithTask().sample_problem(r) for r in [random.Random(1)] for _ in range(10)]
    drift = DriftTask(phase_every=2)
    rng = random.Random(1)
    drifted = [drift.sample_problem(rng) for _ in range(10)]
    assert [p.prompt for p in drifted] == [p.prompt for p in plain]
    assert [p.key for p in drifted] == [p.key for p in plain]
    assert {p.meta["phase"] for p in drifted} == {0, 1}
    messages, _ = episode(drift, drifted[2], ["Answer: 0"])  # phase 1
    assert messages == [{"role": "user", "content": drifted[2].prompt}]


def test_reward_is_correct_and_in_the_phases_format():
    task = DriftTask(phase_every=1)
    rng = random.Random(2)
    p0, p1 = task.sample_problem(rng), task.sample_problem(rng)
    assert (p0.meta["phase"], p1.meta["phase"]) == (0, 1)
    for p, good, bad in ((p0, "Answer", "Result"), (p1, "Result", "Answer")):
        right, wrong = p.answer, str(int(p.answer) + 1)
        _, r = episode(task, p, [f"1+1=2\n{good}: {right}"])
        assert r.reward == 1.0 and r.info["quality"] == 1.0 and r.info["style_ok"]
        _, r = episode(task, p, [f"1+1=2\n{bad}: {right}"])  # right value, wrong label
        assert r.reward == 0.0 and r.info["quality"] == 1.0 and not r.info["style_ok"]
        _, r = episode(task, p, [f"{good}: {wrong}"])  # right label, wrong value
        assert r.reward == 0.0 and r.info["quality"] == 0.0 and r.info["style_ok"]
        _, r = episode(task, p, ["no answer at all"])
        assert r.reward == 0.0 and r.info["method"] == "no-answer"


def test_episode_metrics_name_the_phase():
    task = DriftTask(phase_every=1)
    rng = random.Random(3)
    p0, p1 = task.sample_problem(rng), task.sample_problem(rng)
    _, r0 = episode(task, p0, [f"Answer: {p0.answer}"])
    _, r1 = episode(task, p1, [f"Answer: {p1.answer}"])
    assert r0.info["metrics"] == {
        "reward/phase_0": 1.0,
        "reward/quality": 1.0,
        "reward/style": 1.0,
        "drift/phase": 0.0,
    }
    assert r1.info["metrics"] == {
        "reward/phase_1": 0.0,
        "reward/quality": 1.0,
        "reward/style": 0.0,
        "drift/phase": 1.0,
    }
    # the loop averages each key over the trajectories that report it
    trajs = [
        Trajectory("a", 0, [1], reward=r0.reward, info=r0.info),
        Trajectory("b", 1, [1], reward=r1.reward, info=r1.info),
        Trajectory("c", 2, [1], reward=1.0, info={"metrics": {"reward/phase_1": 1.0}}),
    ]
    logged = batch_metrics([Group(i, None, [t]) for i, t in enumerate(trajs)], version=0)
    assert logged["reward/phase_0"] == 1.0 and logged["reward/phase_1"] == 0.5


def test_wrapper_is_generic_over_multi_turn_tasks():
    # the agent task wrapped with a rule that wants the scratchpad to end with a newline-free answer
    phases = [Phase("any", lambda text: True), Phase("short", lambda text: len(text) < 12)]
    task = DriftingTask(AgentTask(), phases, phase_every=1)
    assert task.stop == AgentTask.stop and task.max_turns == AgentTask().max_turns
    rng = random.Random(4)
    problems = [task.sample_problem(rng) for _ in range(2)]
    for p, expected in zip(problems, (1.0, 0.0), strict=True):
        lookups = [f"<tool>get {name}</tool>" for name in p.meta["names"]]
        _, r = episode(task, p, [*lookups, f"scratch\nAnswer: {p.answer}"])
        assert r.reward == expected and r.info["metrics"]["tool/calls"] == len(lookups)
        assert f"reward/phase_{p.meta['phase']}" in r.info["metrics"]
    assert task.make_env(problems[0]).observation_role == "tool"


def test_labels_and_quality_grader():
    assert last_label("7+5=12\nAnswer: 12") == ("Answer", "12")
    assert last_label("Answer: 3\nResult: -4  \n") == ("Result", "-4")
    assert last_label("the Answer: 3") is None  # must start a line
    assert grade_either_label("x\nResult: 17", "17").correct
    assert grade_either_label("x\nAnswer: 17", "17").correct
    assert not grade_either_label("Answer: 17\nResult: 16", "17").correct  # the last line counts
    assert grade_either_label("17", "17").method == "no-answer"
    phase = label_phase("Result")
    assert phase.name == "result" and phase.accepts("Result: 1") and not phase.accepts("Answer: 1")


def test_demonstrations_use_both_formats_in_the_answer_share():
    for share, task in ((0.3, DriftTask()), (0.5, DriftTask(answer_share=0.5))):  # 0.3: the default
        labels = [last_label(d[-1]["content"])[0] for d in task.demonstrations(random.Random(5), 2000)]
        assert share - 0.05 < labels.count("Answer") / 2000 < share + 0.05
        assert labels.count("Result") + labels.count("Answer") == 2000
    # the relabelling only touches the final label: the scratchpad is arith's
    clean = LabelledArithTask(answer_share=0.0, demo_error_rate=0.0).demonstrations(random.Random(6), 50)
    for user, reply in clean:
        assert reply["content"].endswith(f"Result: {eval(user['content'][:-3])}")
        assert "Answer" not in reply["content"]


def test_eval_problems_are_fixed_and_in_the_eval_phase():
    task = DriftTask(phase_every=1)
    a, b = task.eval_problems(20, seed=0), DriftTask(eval_phase=1).eval_problems(20, seed=0)
    assert [p.prompt for p in a] == [p.prompt for p in ArithTask().eval_problems(20, seed=0)]
    assert {p.meta["phase"] for p in a} == {0} and {p.meta["phase"] for p in b} == {1}
    assert task.drawn == 0  # evaluation does not advance the schedule
    _, r = episode(task, a[0], [f"Result: {a[0].answer}"])
    assert r.reward == 0.0  # eval is phase 0: Answer wanted


def test_registry_and_arguments():
    task = task_registry.make("drift", phase_every=5)
    assert isinstance(task, DriftTask) and task.phase_every == 5 and task.max_turns == 1
    assert recipe_for("drift").pretrain_steps == recipe_for("arith").pretrain_steps
    for bad in ({"phase_every": 0}, {"eval_phase": 2}, {"answer_share": 1.5}):
        with pytest.raises(ValueError):
            DriftTask(**bad)
    with pytest.raises(ValueError):
        DriftingTask(ArithTask(), [], phase_every=1)


def test_the_drift_task_never_trains_on_its_held_out_chains():
    # 32,000 draws (the drift reference trains 15,360 trajectories); held out: arith's buckets
    task = DriftTask()
    rng = random.Random(0)
    trained = {task.sample_problem(rng).prompt for _ in range(32_000)}
    test = {p.prompt for p in task.eval_problems(1000)}
    validation = {p.prompt for p in task.eval_problems(200, split=Split.VALIDATION)}
    assert not trained & test and not trained & validation and not test & validation
    assert [p.prompt for p in task.eval_problems(50)] == [p.prompt for p in ArithTask().eval_problems(50)]
