"""`arith`: chained single-digit addition/subtraction with a step-by-step scratchpad.

A task small enough that a ~1M-parameter character-level transformer learns the format
after a few minutes of supervised warm-start on two CPU cores, with heavy-tailed response
lengths (what asynchronous training exploits) and deliberate headroom for RL.

    prompt:      7+5-3+8=?\\n
    completion:  7+5=12\\n12-3=9\\n9+8=17\\nAnswer: 17      (then the engine's end-of-sequence)
"""

from __future__ import annotations

import inspect
import random
from enum import StrEnum
from typing import Any, ClassVar

from envs.base import Env, Grader, Message, Problem, SingleTurnEnv, Task
from envs.config_names import config_name
from envs.math.graders import grade_integer, grade_last_integer
from envs.splits import ContentSplit, Split, held_out_split

_ERROR_OFFSETS = (-2, -1, 1, 2)

SPLIT = ContentSplit(salt="arith-split-v1", test=0.2, validation=0.1)
"""arith's partition by expression (`envs.splits`): 20% of every length's chains are test
problems, 10% validation, 70% training (of the 162 two-operand chains: 39 test, 12 validation,
111 training)."""


def format_expression(operands: list[int], ops: list[str]) -> str:
    """`[7, 5, 3], ["+", "-"]` -> "7+5-3"."""
    return str(operands[0]) + "".join(op + str(x) for op, x in zip(ops, operands[1:], strict=True))


def evaluate(operands: list[int], ops: list[str]) -> int:
    """The exact value of the chain, left to right."""
    total = operands[0]
    for op, x in zip(ops, operands[1:], strict=True):
        total = total + x if op == "+" else total - x
    return total


def worked_solution(
    operands: list[int], ops: list[str], rng: random.Random | None = None, error_rate: float = 0.0
) -> str:
    """The scratchpad completion, one line per step, then `Answer: <last running total>`.

    With `error_rate > 0` (and an `rng`), each step's result is independently wrong with
    that probability (off by -2, -1, +1 or +2); later steps continue from the wrong running
    total, so the final answer inherits the error.
    """
    lines = []
    total = operands[0]
    for op, x in zip(ops, operands[1:], strict=True):
        result = total + x if op == "+" else total - x
        if error_rate > 0 and rng is not None and rng.random() < error_rate:
            result += rng.choice(_ERROR_OFFSETS)
        lines.append(f"{total}{op}{x}={result}")
        total = result
    lines.append(f"Answer: {total}")
    return "\n".join(lines)


class ArithGrading(StrEnum):
    """How an arith answer is read: `marked` (`grade_integer`: `Answer: N`, `\\boxed{N}`, `answer
    is N`; the tiny model's convention) or `last-number` (`grade_last_integer`: the last number
    written, for small instruct models that answer `7 + 5 = 12` and follow no answer format)."""

    MARKED = "marked"
    LAST_NUMBER = "last-number"


class ArithPromptFormat(StrEnum):
    """How an arith problem is asked: `equation` (`7+5-3=?`, the tiny model's form) or
    `question` (`What is 7 + 5 - 3?`, the form small instruct models answer best)."""

    EQUATION = "equation"
    QUESTION = "question"


def format_prompt(expression: str, prompt_format: ArithPromptFormat) -> str:
    """The user prompt of `expression` ("7+5-3") in `prompt_format`."""
    if prompt_format is ArithPromptFormat.QUESTION:
        return "What is " + expression.replace("+", " + ").replace("-", " - ") + "?"
    return f"{expression}=?\n"


GRADERS: dict[ArithGrading, Grader] = {
    ArithGrading.MARKED: grade_integer,
    ArithGrading.LAST_NUMBER: grade_last_integer,
}


class ArithTask(Task):
    """Integer arithmetic chains such as `7+5-3+8=?`, answered with a scratchpad.

    Problems: operands are digits 1-9 joined by `+`/`-` (each with probability 1/2); the
    number of operands is `2 + K`, capped at `max_operands`, where K ~ Geometric(`p_more`)
    counts failures before the first success: P(K = k) = (1 - p_more)^k * p_more. With
    the default p_more = 0.35: 35% of problems have 2 operands, mean about 3.9, ~7.5% have
    8 or more, ~1.3% hit the cap of 12. Response length grows linearly with the operand
    count, so the length distribution is heavy-tailed. Grading (`grading`, `ArithGrading`):
    `grade_integer` on the completion (the `Answer: N` line) by default, or the last number
    written (`last-number`, for instruct models that follow no answer format: an echo of the
    prompt then scores where the answer equals the last operand, e.g. `6-3` or `5-5+3`: ~3% of
    2- and 3-operand chains, tested); reward 1 if exact. `system_prompt`: a system message before
    every prompt (instruct models; needs a chat template), which evaluation of the run asks with too.
    `prompt_format` (`ArithPromptFormat`): `7+5-3=?` by default, or `What is 7 + 5 - 3?`, on which
    SmolLM2-135M-Instruct starts near 20% where the equation form gives it under 10% (REPRODUCE.md).

    Base-checkpoint recipe (deliberate): `demonstrations` are NOISY. Each intermediate
    step's result is wrong with probability `demo_error_rate` (default 0.15; off by +-1 or
    +-2) and the error propagates to the final answer. A model cloned from them is right
    only part of the time (about 0.85^(steps) per problem, so ~66% on the task's mix, much less
    on long chains), which leaves RL room to improve; a demonstration set with
    `demo_error_rate=0` gives the clean oracle.

    The demonstrations' chains are longer than the task's: their operand count uses
    `demo_p_more` (default 0.15: mean about 6.6 operands, half of them 6 or more) instead of
    `p_more`. Cloned from the task's own mix (35% two-operand chains), the tiny model never
    learnt to find the next operand of a long prompt: it solved 0-11% of 5+-operand chains
    even greedily, so RL could only sharpen the short ones and the gain stopped near +15
    points. Trained on the longer mix for the same 1000 steps it follows long chains (greedy
    answers mostly right up to 6 operands; sampled avg@4 of 5 operands 0.33) at about the
    same mean (0.46), and 10 minutes of SAO or GRPO then gain 22-29 points (README).
    `demo_p_more=0.35` is the old recipe.

    Splits (`SPLIT`, by the expression's content hash): training draws only chains of the train
    bucket; `eval_problems(n, seed, split)` draws n chains i.i.d. from the task's distribution
    restricted to the test (or validation) bucket, so no held-out chain is ever trained on and
    the validation and test sets share none. Every draw, training or held out, takes its length
    from the task's mix, then a uniform chain of that length in its bucket: the buckets' shares
    of the short lengths differ by chance (39 of the 162 two-operand chains are test chains,
    24%, not 20%), and rejecting whole draws would tilt the test set towards two-operand chains
    (39% instead of 35%). The trade-off, chosen deliberately: a held-out set keeps its repeats.
    Short chains are few (162 with two operands, 2,916 with three) and 35% of draws have two
    operands, so the test bucket's 39 two-operand chains recur in a large test set (about 350
    of the 1,000 `arith` problems); deduplicating would keep each once, a few percent of the
    set, tilting it towards long chains, and the score would no longer estimate accuracy on the
    distribution trained on. Problems are i.i.d. draws, so the CIs over problems stay valid;
    the `n_operands` breakdown shows each length. Holding out a larger share would leave fewer
    short chains to train on. The warm-start demonstrations are drawn from the train bucket
    only, with their own length mix (`demo_p_more`): a base model never saw a test or
    validation chain (`demonstrations_version` 2; version 1 drew them from the whole space).
    """

    name = "arith"
    EVAL_ARGS: ClassVar[tuple[str, ...]] = ("grading", "max_operands", "p_more", "prompt_format")
    """The arguments that change the held-out problems, how they are asked or graded (`benchmark_name`)."""
    episode_only_args = ("grading", "system_prompt")  # how episodes are asked and graded, not the base
    keyed_when_set = ("prompt_format",)  # its default asks as before: the shipped base keeps its key
    summary = "single-digit +/- chains with a scratchpad, heavy-tailed lengths, noisy demonstrations"
    default_runtime = "none"
    max_new_tokens = 160
    max_turns = 1
    stop = ()
    demonstrations_version = 2  # 2: drawn from the train bucket only

    def __init__(
        self,
        demo_error_rate: float = 0.15,
        max_operands: int = 12,
        p_more: float = 0.35,
        demo_p_more: float = 0.15,
        grading: str = ArithGrading.MARKED,
        system_prompt: str | None = None,
        prompt_format: str = ArithPromptFormat.EQUATION,
    ):
        """See the class docstring for the meaning of each argument."""
        for name, value, choices in (
            ("grading", grading, ArithGrading),
            ("prompt_format", prompt_format, ArithPromptFormat),
        ):
            if value not in tuple(choices):
                raise ValueError(f"{name}: invalid value {value!r}; valid: {', '.join(choices)}")
        if not 0.0 <= demo_error_rate <= 1.0:
            raise ValueError(f"demo_error_rate must be in [0, 1], got {demo_error_rate}")
        if max_operands < 2:
            raise ValueError(f"max_operands must be >= 2, got {max_operands}")
        for name, value in (("p_more", p_more), ("demo_p_more", demo_p_more)):
            if not 0.0 < value <= 1.0:
                raise ValueError(f"{name} must be in (0, 1], got {value}")
        self.demo_error_rate = demo_error_rate
        self.max_operands = max_operands
        self.p_more = p_more
        self.demo_p_more = demo_p_more
        self.grading = ArithGrading(grading)
        self.system_prompt = system_prompt or None
        self.prompt_format = ArithPromptFormat(prompt_format)

    def _length(self, rng: random.Random, p_more: float) -> int:
        """An operand count that continues past 2 with probability 1 - `p_more` (capped)."""
        n = 2
        while n < self.max_operands and rng.random() >= p_more:
            n += 1
        return n

    @staticmethod
    def _chain(rng: random.Random, n: int) -> tuple[list[int], list[str]]:
        """Operands and operators of a uniformly drawn chain of `n` operands."""
        operands = [rng.randint(1, 9) for _ in range(n)]
        ops = [rng.choice("+-") for _ in range(n - 1)]
        return operands, ops

    def _problem(self, key: str, operands: list[int], ops: list[str]) -> Problem:
        """Build the Problem record (operands and operators kept in `meta`)."""
        expression = format_expression(operands, ops)
        return Problem(
            key=key,
            prompt=format_prompt(expression, self.prompt_format),
            answer=str(evaluate(operands, ops)),
            meta={"operands": list(operands), "ops": list(ops), "n_operands": len(operands)},
        )

    def _draw_in(
        self, bucket: Split, rng: random.Random, p_more: float | None = None
    ) -> tuple[list[int], list[str]]:
        """A chain of `bucket`: its length from the mix of `p_more` (default the task's), then
        uniformly among the bucket's chains of that length (so every split keeps the mix exactly)."""
        n = self._length(rng, self.p_more if p_more is None else p_more)
        return SPLIT.draw_in(bucket, lambda: self._chain(rng, n), lambda d: format_expression(*d))

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training problem, from the task's operand mix (`p_more`), in the train bucket."""
        operands, ops = self._draw_in(Split.TRAIN, rng)
        return self._problem(f"arith-{format_expression(operands, ops)}", operands, ops)

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """`n` held-out problems of the `split` bucket from the stream "arith-<split>-<seed>"
        (deterministic; repeats kept, see the class docstring); keys `arith-eval<seed>-NNNNNN`
        (test) and `arith-val<seed>-NNNNNN` (validation)."""
        bucket = held_out_split(split)
        rng = random.Random(f"arith-{bucket}-{seed}")
        tag = "eval" if bucket is Split.TEST else "val"
        return [self._problem(f"arith-{tag}{seed}-{i:06d}", *self._draw_in(bucket, rng)) for i in range(n)]

    @property
    def grader(self) -> Grader:
        """The grader of `grading` (the episodes' and the benchmark's)."""
        return GRADERS[self.grading]

    def make_env(self, problem: Problem) -> Env:
        """A single-turn episode graded by `grader`, after `system_prompt` when one is set."""
        return SingleTurnEnv(problem, self.grader, self.system_prompt)

    @classmethod
    def benchmark_name(cls, task_args: dict[str, Any]) -> str:
        """`arith` at the default held-out config, else the held-out problems' own benchmark
        (`arith@grading=last-number@max_operands=3`): only `EVAL_ARGS` change what is evaluated
        and how it is graded; a value equal to its default is left out."""
        defaults = {k: v.default for k, v in inspect.signature(cls.__init__).parameters.items()}
        config = {k: v for k, v in task_args.items() if k in cls.EVAL_ARGS and v != defaults.get(k)}
        named = config_name(cls.name, {k: str(v) if isinstance(v, StrEnum) else v for k, v in config.items()})
        return named or f"{cls.name}@custom"

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """`n` noisy [user, assistant] conversations on train-bucket chains of the demonstration
        length mix (`demo_p_more`); see the class docstring for the noise."""
        demos = []
        for _ in range(n):
            operands, ops = self._draw_in(Split.TRAIN, rng, self.demo_p_more)
            problem = self._problem(f"arith-{format_expression(operands, ops)}", operands, ops)
            completion = worked_solution(
                problem.meta["operands"], problem.meta["ops"], rng=rng, error_rate=self.demo_error_rate
            )
            demos.append(
                [{"role": "user", "content": problem.prompt}, {"role": "assistant", "content": completion}]
            )
        return demos
