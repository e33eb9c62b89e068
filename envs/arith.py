"""`arith`: chained single-digit addition/subtraction with a step-by-step scratchpad.

A task small enough that a ~1M-parameter character-level transformer learns the format
after a few minutes of supervised warm-start on two CPU cores, with heavy-tailed response
lengths (what asynchronous training exploits) and deliberate headroom for RL.

    prompt:      7+5-3+8=?\\n
    completion:  7+5=12\\n12-3=9\\n9+8=17\\nAnswer: 17      (then the engine's end-of-sequence)
"""

from __future__ import annotations

import random

from envs.base import Env, Message, Problem, SingleTurnEnv, Task
from envs.math.graders import grade_integer

_ERROR_OFFSETS = (-2, -1, 1, 2)


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


class ArithTask(Task):
    """Integer arithmetic chains such as `7+5-3+8=?`, answered with a scratchpad.

    Problems: operands are digits 1-9 joined by `+`/`-` (each with probability 1/2); the
    number of operands is `2 + K`, capped at `max_operands`, where K ~ Geometric(`p_more`)
    counts failures before the first success: P(K = k) = (1 - p_more)^k * p_more. With
    the default p_more = 0.35: 35% of problems have 2 operands, mean about 3.9, ~7.5% have
    8 or more, ~1.3% hit the cap of 12. Response length grows linearly with the operand
    count, so the length distribution is heavy-tailed. Grading: `grade_integer` on the
    completion (the `Answer: N` line); reward 1 if exact.

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
    """

    name = "arith"
    summary = "single-digit +/- chains with a scratchpad, heavy-tailed lengths, noisy demonstrations"
    default_runtime = "none"
    max_new_tokens = 160
    max_turns = 1
    stop = ()

    def __init__(
        self,
        demo_error_rate: float = 0.15,
        max_operands: int = 12,
        p_more: float = 0.35,
        demo_p_more: float = 0.15,
    ):
        """See the class docstring for the meaning of each argument."""
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

    def _draw(self, rng: random.Random, p_more: float) -> tuple[list[int], list[str]]:
        """Operands and operators of one problem whose operand count continues with 1 - `p_more`."""
        n = 2
        while n < self.max_operands and rng.random() >= p_more:
            n += 1
        operands = [rng.randint(1, 9) for _ in range(n)]
        ops = [rng.choice("+-") for _ in range(n - 1)]
        return operands, ops

    def _problem(self, key: str, operands: list[int], ops: list[str]) -> Problem:
        """Build the Problem record (operands and operators kept in `meta`)."""
        expression = format_expression(operands, ops)
        return Problem(
            key=key,
            prompt=f"{expression}=?\n",
            answer=str(evaluate(operands, ops)),
            meta={"operands": list(operands), "ops": list(ops), "n_operands": len(operands)},
        )

    def _keyed_problem(self, rng: random.Random, p_more: float) -> Problem:
        """A problem drawn with `p_more`, keyed by the expression itself (`arith-7+5-3`)."""
        operands, ops = self._draw(rng, p_more)
        return self._problem(f"arith-{format_expression(operands, ops)}", operands, ops)

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training problem, from the task's operand mix (`p_more`)."""
        return self._keyed_problem(rng, self.p_more)

    def eval_problems(self, n: int, seed: int = 0) -> list[Problem]:
        """`n` held-out problems from the seed stream "arith-eval-<seed>" (deterministic)."""
        rng = random.Random(f"arith-eval-{seed}")
        return [self._problem(f"arith-eval{seed}-{i:06d}", *self._draw(rng, self.p_more)) for i in range(n)]

    def make_env(self, problem: Problem) -> Env:
        """A single-turn episode graded by `grade_integer`."""
        return SingleTurnEnv(problem, grade_integer)

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """`n` noisy [user, assistant] conversations; see the class docstring for the noise."""
        demos = []
        for _ in range(n):
            problem = self._keyed_problem(rng, self.demo_p_more)
            completion = worked_solution(
                problem.meta["operands"], problem.meta["ops"], rng=rng, error_rate=self.demo_error_rate
            )
            demos.append(
                [{"role": "user", "content": problem.prompt}, {"role": "assistant", "content": completion}]
            )
        return demos
