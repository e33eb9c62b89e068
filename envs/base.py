"""The environment protocol: asynchronous, multi-turn episodes (`Env`) and task sources (`Task`).

A `Task` is a distribution of problems plus the rules of one episode; the training loop
draws problems with `Task.sample_problem`, evaluates on `Task.eval_problems`, and runs each
episode through the `Env` that `Task.make_env` returns:

    env = task.make_env(problem)
    messages = await env.reset()                 # initial chat messages
    while True:
        action = <one assistant turn generated from messages>
        result = await env.step(action)          # reward, done, observation
        messages += [{"role": "assistant", "content": action}]
        if result.done:
            break
        messages += [{"role": "user" or "tool", "content": result.observation}]

Rewards are per step; for single-turn tasks the one step carries the whole reward. Envs are
async so that tool calls, sandboxes and tests can run concurrently across episodes.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from envs.splits import Split


@dataclass
class GradeResult:
    """The verdict of one grader call.

    `extracted` is the answer string read from the completion (None when none was found);
    `method` names how the verdict was decided: "integer", "numeric", "math-verify",
    "fallback-normalized-string" or "no-answer".
    """

    correct: bool
    extracted: str | None
    method: str


Message = dict[str, str]
"""One chat message: {"role": "system"|"user"|"assistant"|"tool", "content": str}."""

Grader = Callable[[str, str], GradeResult]
"""A grader: (completion text, reference answer) -> GradeResult (e.g. `envs.math.graders`)."""


@dataclass(frozen=True)
class Problem:
    """One problem: a stable `key`, the user-facing `prompt`, the reference `answer` (string)."""

    key: str
    prompt: str
    answer: str
    meta: dict = field(default_factory=dict)


class EnvFaultWarning(UserWarning):
    """An episode ended with reward 0 because its environment failed (a container that died, an
    image that is missing), not because of the model; the message names the problem and the
    cause. The CLI shows it as one `bench: warning: ...` line, once per message."""


@dataclass
class StepResult:
    """What one `Env.step` returns.

    `observation` is environment text to append to the context (None when `done`);
    `info` carries diagnostics such as {"correct": bool, "extracted": "42", "method": ...}.
    """

    observation: str | None
    reward: float
    done: bool
    info: dict = field(default_factory=dict)


class Env(ABC):
    """One episode of a task: `reset` once, then `step` with each assistant turn until done.

    `observation_role` is the chat role under which observations are rendered for models
    with a chat template ("user" for plain follow-ups, "tool" for tool outputs).
    """

    observation_role: ClassVar[str] = "user"

    @abstractmethod
    async def reset(self) -> list[Message]:
        """Start the episode; return the initial messages (system and/or user)."""

    @abstractmethod
    async def step(self, action: str) -> StepResult:
        """Apply the model's action text (one assistant turn) and return the result."""

    async def close(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release what the episode holds (sandboxes, working copies, containers).

        The loop calls it once after every episode, finished, truncated or failed; the default
        does nothing.
        """


def with_system_prompt(messages: list[Message], system_prompt: str | None) -> list[Message]:
    """`messages` with a system message `system_prompt` put first, unless they open with a
    system message of their own (or `system_prompt` is None): the one rule for a task's
    `system_prompt`, in training and in evaluation."""
    if system_prompt is None or (messages and messages[0]["role"] == "system"):
        return messages
    return [{"role": "system", "content": system_prompt}, *messages]


class SingleTurnEnv(Env):
    """A one-step episode: the prompt as a user message (or the problem's own chat messages,
    `meta["messages"]`, as datasets in a conversational layout give them), the answer graded by
    `grader`.

    The reward is 1.0 when the grader says correct, else 0.0; `info` holds `correct`,
    `extracted` and the grader's `method`. Stepping a finished episode is an error.
    """

    def __init__(self, problem: Problem, grader: Grader, system_prompt: str | None = None):
        """Wrap `problem`; `system_prompt`, when given, is prepended as a system message to
        messages that do not open with one."""
        self.problem = problem
        self.grader = grader
        self.system_prompt = system_prompt
        self.done = False

    async def reset(self) -> list[Message]:
        """Return `[system?, {"role": "user", "content": problem.prompt}]`, or `[system?,
        *problem.meta["messages"]]` when the problem carries chat messages."""
        self.done = False
        given = self.problem.meta.get("messages")
        messages: list[Message] = (
            [dict(m) for m in given] if given else [{"role": "user", "content": self.problem.prompt}]
        )
        return with_system_prompt(messages, self.system_prompt)

    async def step(self, action: str) -> StepResult:
        """Grade `action` against the reference answer; the episode ends here."""
        if self.done:
            raise RuntimeError(f"episode for problem {self.problem.key!r} is already done")
        self.done = True
        grade = self.grader(action, self.problem.answer)
        info = {"correct": grade.correct, "extracted": grade.extracted, "method": grade.method}
        return StepResult(observation=None, reward=1.0 if grade.correct else 0.0, done=True, info=info)


class Task(ABC):
    """A source of problems and the episode rules for them.

    Class attributes: `name` (registry key), `summary` (one line), `default_runtime`
    ("local", "docker", or "none" for pure-text tasks), `max_new_tokens` (per assistant
    turn), `max_turns`, `stop` (stop strings for the rollout engine; empty means the
    end-of-sequence token ends a turn) and `episode_only_args` (constructor arguments that
    change episodes but not `demonstrations`, such as tool latency or the runtime: a warm-start
    on the demonstrations does not depend on them) and `demonstrations_version` (bumped when
    what `demonstrations` draws changes, so that base checkpoints cloned from the old ones are
    made again: it is part of their cache key) and `keyed_when_set` (arguments added after bases
    were built whose default draws the same demonstrations as before: they enter the key only
    when set to another value, so the existing bases keep their keys).
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    default_runtime: ClassVar[str] = "none"
    max_new_tokens: ClassVar[int]
    max_turns: ClassVar[int] = 1
    stop: ClassVar[tuple[str, ...]] = ()
    episode_only_args: ClassVar[tuple[str, ...]] = ()
    keyed_when_set: ClassVar[tuple[str, ...]] = ()
    demonstrations_version: ClassVar[int] = 1

    @classmethod
    def benchmark_name(cls, task_args: dict[str, Any]) -> str:
        """The name of the benchmark of this task's own held-out problems under these
        constructor arguments (not necessarily registered): by default the task's name."""
        return cls.name

    @abstractmethod
    def sample_problem(self, rng: random.Random) -> Problem:
        """Draw one problem from the training distribution using `rng` only; never a problem
        `eval_problems` can return (tasks with generated problems partition their space by
        content, `envs.splits`)."""

    @abstractmethod
    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """A fixed held-out set of the `split` bucket (`Split.TEST`, or `Split.VALIDATION` for
        tuning): deterministic for (n, seed, split), never drawn by `sample_problem`, and the
        validation and test sets share no problem. Tasks that hold out only a test set raise
        ValueError for the validation split."""

    @abstractmethod
    def make_env(self, problem: Problem) -> Env:
        """A fresh episode for `problem`."""

    def begin_training(self, rollouts_per_problem: int, trajectories_done: int = 0) -> None:  # noqa: B027
        """Told by the training loop before its first draw: every problem `sample_problem`
        returns will be played `rollouts_per_problem` times (the algorithm's rollouts per
        prompt), and `trajectories_done` were trained on before (a resumed run: steps done x
        trajectories per step). Tasks with a schedule over training (`envs.online.DriftingTask`)
        use it; others ignore it (an optional hook, deliberately not abstract)."""

    def tiny_model_note(self) -> str | None:
        """A known limit of the tiny base model on this task's configuration, which `bench run
        --model tiny` prints before training (e.g. a dataset it never solves, and what to use
        instead); None when there is none."""
        return None

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """`n` whole conversations for supervised warm-start (`bench pretrain`).

        Each is the episode's initial messages followed by alternating assistant turns and
        observations exactly as the env returns them, ending with the assistant's final turn
        (see `bench.models.chat.render_transcript`). Tasks without demonstrations raise
        NotImplementedError (the default).
        """
        raise NotImplementedError(f"task {self.name!r} has no demonstrations")


class SystemPromptedEnv(Env):
    """An episode of another env whose initial messages get a system prompt
    (`with_system_prompt`); everything else is the wrapped env's. Evaluation uses it to render a
    benchmark's problems as a run with `task.system_prompt` rendered its rollouts."""

    def __init__(self, env: Env, system_prompt: str):
        self.env = env
        self.system_prompt = system_prompt
        self.observation_role = env.observation_role

    async def reset(self) -> list[Message]:
        """The wrapped env's initial messages, with the system prompt when they have none."""
        return with_system_prompt(await self.env.reset(), self.system_prompt)

    async def step(self, action: str) -> StepResult:
        """The wrapped env's step."""
        return await self.env.step(action)

    async def close(self) -> None:
        """The wrapped env's close."""
        await self.env.close()
