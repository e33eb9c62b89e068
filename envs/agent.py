"""`agent`: look hidden variables up with a tool, computing as the results come in.

A problem is a +/- chain over named variables whose digit values (1-9) are hidden and drawn
per problem. The model sees only the names, so it must call `get` once per variable (two
at least) and read the results from the observations before it can answer. It keeps a
running total, one scratchpad line per step, written in the turn after each result:

    prompt:        a+c-b=?\\n
    turn 1:        <tool>get a</tool>                 observation: <result>a=7</result>\\n
    turn 2:        <tool>get c</tool>                 observation: <result>c=3</result>\\n
    turn 3:        7+3=10\\n<tool>get b</tool>        observation: <result>b=5</result>\\n
    final turn:    10-5=5\\nAnswer: 5                  (then end-of-sequence)

Why this layout: the ~1M-parameter character-level tiny model learns lookups by content far
sooner than by counting positions. Variable names are distinct letters, so the next name to
look up is the one after the last looked-up name in the prompt, the operator of a step is the
one before the just-returned name, and its operands are the previous line's total and the
value just returned. Tool calls and observations use the shared format of `envs.tools`.
Episode length (turns and tokens) grows with the number of variables, which is heavy-tailed;
tool latency (`tool_latency`, optionally heavy-tailed) is an `asyncio.sleep`, so concurrent
episodes overlap their waits as real tool calls would.
"""

from __future__ import annotations

import asyncio
import random
import re
import string

from envs.arith import evaluate
from envs.base import Env, Message, Problem, StepResult, Task
from envs.math.graders import grade_integer
from envs.splits import ContentSplit, Split, held_out_split
from envs.tool_env import Final, ToolEnv, ToolFn
from envs.tools import TOOL_STOP, format_tool_call

LATENCY_DISTS = ("fixed", "exponential", "pareto")
"""Tool-latency distributions; each has mean `tool_latency` (see `sample_latency`)."""

PARETO_SHAPE = 2.0
"""Shape of the "pareto" latency: finite mean, infinite variance (a genuinely heavy tail)."""

_ERROR_OFFSETS = (-2, -1, 1, 2)  # a wrong demonstration step is off by this much, as in `arith`
_VARIABLE = re.compile(r"[a-z]")
_RESULT = re.compile(r"<result>([a-z])=(\d+)</result>")

SPLIT = ContentSplit(salt="agent-split-v1", test=0.2, validation=0.1)
"""agent's partition by problem content, the chain and its hidden values (`envs.splits`)."""


def sample_latency(mean: float, dist: str, rng: random.Random) -> float:
    """One tool call's latency in seconds, with mean `mean`.

    "fixed": always `mean`; "exponential": Exp with that mean; "pareto": Pareto with shape
    `PARETO_SHAPE` scaled to that mean (minimum mean/2; P(X > x) = (mean / 2x)^2), so a few
    calls take many times the mean, like a slow API or a long test run.
    """
    if mean <= 0:
        return 0.0
    if dist == "fixed":
        return mean
    if dist == "exponential":
        return rng.expovariate(1.0 / mean)
    if dist == "pareto":
        return mean * (PARETO_SHAPE - 1) / PARETO_SHAPE * rng.paretovariate(PARETO_SHAPE)
    raise ValueError(f"unknown tool latency distribution {dist!r}; choose one of {', '.join(LATENCY_DISTS)}")


def parse_prompt(prompt: str) -> tuple[list[str], list[str]]:
    """`"a+c-b=?\\n"` -> (["a", "c", "b"], ["+", "-"]): the variable names and the operators."""
    expression = prompt.split("=", 1)[0]
    return _VARIABLE.findall(expression), re.findall(r"[+-]", expression)


def _content(problem: Problem) -> str:
    """What makes an agent problem itself: its chain and hidden values, `a+c-b/735`."""
    values = problem.meta["values"]
    return f"{problem.prompt.split('=', 1)[0]}/{''.join(str(values[name]) for name in problem.meta['names'])}"


class AgentEnv(ToolEnv):
    """One episode: the chain as the user message; tool `get NAME` returns `NAME=VALUE`.

    Unknown names and malformed arguments come back as `error: ...` observations (counted in
    `info`). A turn without a tool call is the final answer, graded by `grade_integer` against
    the chain's value: reward 1 if exact and (with `require_lookups`, the default) every
    variable was looked up, else 0. Why the lookup condition: without it a right answer
    built on guessed values counts as a solution; those were 19% of the tiny base model's
    successes on the held-out set, and GRPO's group normalisation, which gives a rare success
    in a hard group a large advantage, raised them to 35% while the success rate fell.
    `info["answer_correct"]` is the grader's verdict alone. The final `info["metrics"]` holds
    `tool/calls`, `tool/errors` (unknown variables, malformed calls, unknown tools),
    `tool/unread_vars` (variables never looked up) and `tool/latency_s` (seconds spent waiting
    on tools).
    """

    def __init__(
        self,
        problem: Problem,
        max_tool_calls: int,
        tool_latency: float = 0.0,
        tool_latency_dist: str = "fixed",
        latency_rng: random.Random | None = None,
        require_lookups: bool = True,
    ):
        """`problem.meta["values"]` holds the hidden values; latencies are drawn from `latency_rng`;
        `require_lookups`: a right answer earns reward only if every variable was looked up."""
        super().__init__(max_tool_calls=max_tool_calls)
        self.require_lookups = require_lookups
        self.problem = problem
        self.values: dict[str, int] = dict(problem.meta["values"])
        self.tool_latency, self.tool_latency_dist = tool_latency, tool_latency_dist
        self.latency_rng = latency_rng or random.Random(0)
        self.looked_up: set[str] = set()
        self.waited_s = 0.0

    def initial_messages(self) -> list[Message]:
        """Just the chain (no system prompt: every character costs the tiny model a token)."""
        return [{"role": "user", "content": self.problem.prompt}]

    def tools(self) -> dict[str, ToolFn]:
        """The one tool, `get NAME`."""
        return {"get": self._get}

    async def _get(self, argument: str) -> str:
        """Wait the tool's latency, then return `NAME=VALUE` (or raise: an error observation)."""
        delay = sample_latency(self.tool_latency, self.tool_latency_dist, self.latency_rng)
        if delay > 0:
            await asyncio.sleep(delay)
            self.waited_s += delay
        name = argument.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError("usage: get NAME")
        if name not in self.values:
            raise ValueError(f"unknown variable {name!r}")
        self.looked_up.add(name)
        return f"{name}={self.values[name]}"

    @property
    def unread_vars(self) -> int:
        """Variables of the chain not looked up (yet)."""
        return len(self.values) - len(self.looked_up)

    async def finish(self, action: str) -> Final:
        """Grade the final answer with `grade_integer` (and, with `require_lookups`, check that
        no variable went unread)."""
        grade = grade_integer(action, self.problem.answer)
        correct = grade.correct and not (self.require_lookups and self.unread_vars)
        info = {
            "correct": correct,
            "answer_correct": grade.correct,
            "extracted": grade.extracted,
            "method": grade.method,
        }
        return Final(1.0 if correct else 0.0, info)

    async def step(self, action: str) -> StepResult:
        """`ToolEnv.step`, plus the per-episode metrics when the episode ends."""
        result = await super().step(action)
        if result.done:
            c = self.counts
            result.info["metrics"] = {
                "tool/calls": float(c["tool_calls"]),
                "tool/errors": float(c["tool_errors"] + c["malformed_calls"] + c["unknown_tools"]),
                "tool/unread_vars": float(self.unread_vars),
                "tool/latency_s": self.waited_s,
            }
        return result


class AgentTask(Task):
    """Chains such as `a+c-b=?` over hidden single-digit variables, solved with `get` lookups.

    Problems: 2 + K distinct variables (letters a-z, in random order), K ~ Geometric(`p_more`)
    capped so that there are at most `max_vars` (with the defaults 0.35 and 10: 35% of
    problems have 2 variables, mean ~3.8, ~3% hit the cap); operators `+`/`-` with probability
    1/2 each; values uniform in 1-9, drawn with the problem (kept in `meta["values"]`, never
    shown). An episode allows `2 * max_vars` tool calls (the next one ends it with reward 0).

    Tool latency: `tool_latency` seconds per call (mean), distributed as `tool_latency_dist`
    ("fixed", "exponential" or the heavy-tailed "pareto", see `sample_latency`). Each env gets
    its own latency stream, seeded in `make_env` order from `latency_seed`.
    `require_lookups` (default True): reward only answers whose variables were all looked
    up (see `AgentEnv`); False grades the answer alone.

    Base-checkpoint recipe (deliberate, as in `arith`): `demonstrations` are played by a
    scripted agent against `AgentEnv`, so every observation is exactly the env's. The agent is
    NOISY: it skips each lookup with probability `demo_skip_rate` and guesses that value
    (a random digit), and each scratchpad step is off by 1 or 2 with probability
    `demo_error_rate` (the error propagates). A demonstration is right with probability
    about (1 - skip)^vars * (1 - error)^(vars - 1): ~64% on average with the defaults, much
    less on long chains, so RL has headroom; rates of 0 give the clean oracle.

    Splits (`SPLIT`): a problem's content is its chain and hidden values (its training key
    `agent-<chain>/<values>`); training draws only train-bucket problems and
    `eval_problems(n, seed, split)` draws from the test (or validation) bucket, as in `arith`.
    The space is large (105,300 two-variable problems), so held-out sets rarely repeat a problem.
    """

    name = "agent"
    summary = "look up hidden variables with a tool (>= 2 calls) and add them up; heavy-tailed, tool latency"
    default_runtime = "none"
    max_new_tokens = 96  # a step line + a lookup is <= 29 characters; see scripted_episode
    max_turns = 21  # 2 * max_vars tool calls + the final answer, for the default max_vars = 10
    stop = (TOOL_STOP,)
    episode_only_args = ("tool_latency", "tool_latency_dist", "latency_seed", "require_lookups")

    def __init__(
        self,
        tool_latency: float = 0.0,
        tool_latency_dist: str = "fixed",
        latency_seed: int = 0,
        demo_error_rate: float = 0.1,
        demo_skip_rate: float = 0.05,
        max_vars: int = 10,
        p_more: float = 0.35,
        require_lookups: bool = True,
    ):
        """See the class docstring for the meaning of each argument."""
        if tool_latency < 0:
            raise ValueError(f"tool_latency must be >= 0, got {tool_latency}")
        if tool_latency_dist not in LATENCY_DISTS:
            raise ValueError(f"tool_latency_dist must be one of {LATENCY_DISTS}, got {tool_latency_dist!r}")
        for arg, rate in (("demo_error_rate", demo_error_rate), ("demo_skip_rate", demo_skip_rate)):
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"{arg} must be in [0, 1], got {rate}")
        if not 2 <= max_vars <= 26:
            raise ValueError(f"max_vars must be in [2, 26] (one letter each), got {max_vars}")
        if not 0.0 < p_more <= 1.0:
            raise ValueError(f"p_more must be in (0, 1], got {p_more}")
        if not isinstance(require_lookups, bool):
            raise ValueError(f"require_lookups must be true or false, got {require_lookups!r}")
        self.tool_latency, self.tool_latency_dist = float(tool_latency), tool_latency_dist
        self.demo_error_rate, self.demo_skip_rate = demo_error_rate, demo_skip_rate
        self.max_vars, self.p_more = max_vars, p_more
        self.require_lookups = require_lookups
        self.max_tool_calls = 2 * max_vars  # room to retry after errors, but not to loop forever
        self.max_turns = self.max_tool_calls + 1  # instance value: follows max_vars
        self._latency_seeds = random.Random(f"agent-latency-{latency_seed}")

    def _length(self, rng: random.Random) -> int:
        """A variable count that continues past 2 with probability 1 - `p_more` (capped)."""
        n = 2
        while n < self.max_vars and rng.random() >= self.p_more:
            n += 1
        return n

    def _problem(self, rng: random.Random, key: str | None = None, n: int | None = None) -> Problem:
        """Draw one problem of `n` variables (default: from the task's mix) from `rng`; the key
        defaults to `agent-<chain>/<values in order>`."""
        n = self._length(rng) if n is None else n
        names = rng.sample(string.ascii_lowercase, n)
        ops = [rng.choice("+-") for _ in range(n - 1)]
        digits = [rng.randint(1, 9) for _ in range(n)]
        expression = names[0] + "".join(op + name for op, name in zip(ops, names[1:], strict=True))
        return Problem(
            key=key or f"agent-{expression}/{''.join(map(str, digits))}",
            prompt=f"{expression}=?\n",
            answer=str(evaluate(digits, ops)),
            meta={"names": names, "ops": ops, "values": dict(zip(names, digits, strict=True)), "n_vars": n},
        )

    def _draw_in(self, bucket: Split, rng: random.Random, key: str | None = None) -> Problem:
        """A problem of `bucket`: its length from the task's mix, then uniformly among the bucket's
        problems of that length (every split keeps the mix of lengths exactly, as in `arith`)."""
        n = self._length(rng)
        return SPLIT.draw_in(bucket, lambda: self._problem(rng, key, n), _content)

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training problem (train bucket) drawn with `rng` only."""
        return self._draw_in(Split.TRAIN, rng)

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """`n` held-out problems of the `split` bucket from the stream "agent-<split>-<seed>"
        (deterministic); keys `agent-eval<seed>-NNNNNN` (test), `agent-val<seed>-NNNNNN`."""
        bucket = held_out_split(split)
        rng = random.Random(f"agent-{bucket}-{seed}")
        tag = "eval" if bucket is Split.TEST else "val"
        return [self._draw_in(bucket, rng, key=f"agent-{tag}{seed}-{i:06d}") for i in range(n)]

    def make_env(self, problem: Problem) -> Env:
        """A fresh `AgentEnv` with this task's latency and its own latency stream."""
        return self._env(problem, self.tool_latency)

    def _env(self, problem: Problem, latency: float) -> AgentEnv:
        seed = self._latency_seeds.getrandbits(64) if latency > 0 else 0
        return AgentEnv(
            problem,
            self.max_tool_calls,
            latency,
            self.tool_latency_dist,
            latency_rng=random.Random(seed),
            require_lookups=self.require_lookups,
        )

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """`n` noisy conversations played by the scripted agent (class docstring) against
        zero-latency `AgentEnv`s."""

        async def play_all() -> list[list[Message]]:
            return [
                await scripted_episode(
                    self._env(self.sample_problem(rng), 0.0), rng, self.demo_error_rate, self.demo_skip_rate
                )
                for _ in range(n)
            ]

        return asyncio.run(play_all())


async def scripted_episode(
    env: AgentEnv, rng: random.Random, error_rate: float = 0.0, skip_rate: float = 0.0
) -> list[Message]:
    """Play one episode as the demonstrating agent; return the whole conversation.

    The agent reads the variables and operators from the prompt and looks the variables up in
    order, reading each value back from the observation; each turn opens with the scratchpad
    step for the value just returned (`total op value=new total`), as in `arith` wrong by 1 or
    2 with probability `error_rate`, the error propagating. With probability `skip_rate` it
    skips a lookup and guesses the value (a digit) instead: that step then joins the next
    turn. The final turn is the last steps and `Answer: <total>`.
    """
    messages = await env.reset()
    names, ops = parse_prompt(messages[-1]["content"])
    lines: list[str] = []  # scratchpad steps not yet written
    total = 0
    for i, name in enumerate(names):
        if rng.random() < skip_rate:
            value = rng.randint(1, 9)
        else:
            action = "\n".join([*lines, format_tool_call("get", name)])
            result = await env.step(action)
            messages += [
                {"role": "assistant", "content": action},
                {"role": env.observation_role, "content": result.observation or ""},
            ]
            lines = []
            value = int(dict(_RESULT.findall(result.observation or ""))[name])
        if i == 0:
            total = value
            continue
        new = total + value if ops[i - 1] == "+" else total - value
        if error_rate > 0 and rng.random() < error_rate:
            new += rng.choice(_ERROR_OFFSETS)
        lines.append(f"{total}{ops[i - 1]}{value}={new}")
        total = new
    final = "\n".join([*lines, f"Answer: {total}"])
    await env.step(final)
    messages.append({"role": "assistant", "content": final})
    return messages
