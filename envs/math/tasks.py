"""`math`: training on a local file of math problems, with or without a Python tool.

For real (pretrained) models, `--model PATH`; the embedded character-level model cannot do
this task, so it has no demonstrations. Task arguments (`--set task.ARG=VALUE`):

- `data` (required): a JSONL, JSON (list of objects), CSV or parquet file, one problem a row.
  Columns are matched case-insensitively: the problem is `problem` (or `question`), the answer
  `answer` (or `short answer`, as in IMOAnswerBench). When every answer contains `####` the
  file is read as GSM8K (`question`/`answer` with the solution before `#### N`): the reference
  becomes N and the full solution is kept in `meta["solution"]`.
- `grader` in {auto, integer, gsm8k, symbolic} (`envs.math.graders`). `auto` picks gsm8k for
  GSM8K-style files, integer when every answer is an integer (AIME-style), else symbolic
  (math-verify with the counted string fallback; IMOAnswerBench-style). An explicit grader
  is checked against every answer when the task is built.
- `tools` in {none, python}: `python` is the tool-integrated variant (`envs.math.python_tool`):
  up to `max_tool_calls` (default 8) sandboxed Python runs of `python_cpu_seconds` (default 5)
  each, then a final answer. `none` is one turn.
- `eval_fraction` (default 0.1): the share of rows held out for evaluation.

Prompt (both variants): the problem, a blank line, then "Please reason step by step, and put
your final answer within \\boxed{}." (the wording of the benchmarks' `BOXED_TEMPLATE`, so
training and `bench eval` prompts match). The tool variant adds a system prompt describing
the tool. The reward is 1 for a correct final answer, else 0.

Train/eval separation: a row is held out when sha256("math-split-v1" + its problem text with
whitespace collapsed), read as a number in [0, 1), is below `eval_fraction`. The split depends
only on the problem text, not on row order, file or seed, and duplicated problems land on the
same side, so training never draws a held-out problem. If the hash leaves one side empty, the
row nearest the boundary moves over (a file needs at least two distinct problems).
`sample_problem` draws uniformly from the training rows; `eval_problems(n, seed)` returns the
first n held-out rows in an order shuffled by `seed` (all of them when n exceeds their number).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from envs.base import Env, Grader, Message, Problem, SingleTurnEnv, Task
from envs.data_files import read_rows
from envs.math.graders import grade_gsm8k, grade_integer, grade_symbolic, gsm8k_reference
from envs.math.python_tool import DEFAULT_CPU_SECONDS, DEFAULT_OBSERVATION_CHARS, MathToolEnv, python_limits
from envs.splits import Split, hash_position, held_out_split
from envs.tools import TOOL_STOP

GRADERS: dict[str, Grader] = {"integer": grade_integer, "gsm8k": grade_gsm8k, "symbolic": grade_symbolic}
"""Grader name (task arg `grader`) -> grader; `auto` chooses among these from the data."""

TOOL_MODES = ("none", "python")
PROBLEM_COLUMNS = ("problem", "question")
ANSWER_COLUMNS = ("answer", "short answer")
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
"""Appended to every problem (same wording as `benchmarks.math_sets.BOXED_TEMPLATE`)."""

MISSING_DATA = (
    "task 'math' needs --set task.data=PATH (a JSONL/CSV with problem and answer columns, "
    "e.g. ../shared/data/gsm8k/test.jsonl)"
)
_SPLIT_SALT = "math-split-v1"


# ----------------------------------------------------------------------------- data


def _column(columns: list[str], names: tuple[str, ...], path: Path, what: str) -> str:
    """The first column whose lower-cased, stripped name is in `names`."""
    by_name = {c.strip().lower(): c for c in columns}
    for name in names:
        if name in by_name:
            return by_name[name]
    raise ValueError(
        f"{path} has no {what} column (one of {', '.join(names)}); columns: {', '.join(columns)}"
    )


def _is_integer(answer: str) -> bool:
    """Whether `grade_integer` accepts `answer` as a reference (it raises otherwise)."""
    try:
        grade_integer("", answer)
    except ValueError:
        return False
    return True


def _check_answers(answers: list[str], grader: str, path: Path) -> None:
    """Refuse an explicit grader that cannot read some reference answer (first bad row named)."""
    for i, answer in enumerate(answers):
        if grader == "integer" and not _is_integer(answer):
            raise ValueError(f"grader='integer' but row {i} of {path} has answer {answer!r}")
        if grader == "gsm8k":
            try:
                gsm8k_reference(answer)
            except ValueError:
                raise ValueError(f"grader='gsm8k' but row {i} of {path} has answer {answer!r}") from None


def load_problems(path: Path, grader: str = "auto") -> tuple[list[Problem], str]:
    """All rows of `path` as Problems (file order, keys `math-<row>`) and the grader name to use.

    See the module docstring for the accepted columns, the GSM8K detection and `auto`.
    """
    rows = read_rows(path)
    if not rows:
        raise ValueError(f"{path} holds no rows")
    columns = list(rows[0])
    problem_col = _column(columns, PROBLEM_COLUMNS, path, "problem")
    answer_col = _column(columns, ANSWER_COLUMNS, path, "answer")
    texts, answers = [], []
    for i, row in enumerate(rows):
        text = str(row.get(problem_col) or "").strip()
        answer = str(row.get(answer_col) if row.get(answer_col) is not None else "").strip()
        if not text or not answer:
            raise ValueError(f"row {i} of {path} has an empty {problem_col!r} or {answer_col!r}")
        texts.append(text)
        answers.append(answer)
    gsm8k_schema = all("####" in a for a in answers)
    solutions = answers if gsm8k_schema else [None] * len(answers)
    if gsm8k_schema:  # the reference is the number after the last `####`
        answers = [a.rsplit("####", 1)[1].strip() for a in answers]
    if grader == "auto":
        if gsm8k_schema:
            grader = "gsm8k"
        else:
            grader = "integer" if all(_is_integer(a) for a in answers) else "symbolic"
    _check_answers(answers, grader, path)
    problems = [
        Problem(
            key=f"math-{i:05d}",
            prompt=f"{text}\n\n{INSTRUCTION}",
            answer=answer,
            meta={"row": i, "problem": text, **({"solution": solution} if solution else {})},
        )
        for i, (text, answer, solution) in enumerate(zip(texts, answers, solutions, strict=True))
    ]
    return problems, grader


def split_position(problem_text: str) -> float:
    """Where a problem falls in [0, 1) for the train/eval split (salted sha256 of its text)."""
    canonical = re.sub(r"\s+", " ", problem_text).strip()
    return hash_position(_SPLIT_SALT, canonical)


def split_train_eval(problems: list[Problem], eval_fraction: float) -> tuple[list[Problem], list[Problem]]:
    """(train, eval): eval holds the problems whose text's `split_position` is below `eval_fraction`.

    When that leaves a side empty, the threshold moves to the nearest distinct position, so
    both sides get rows and equal texts stay together; raises ValueError for fewer than two
    distinct problems.
    """
    positions = [split_position(p.meta["problem"]) for p in problems]
    distinct = sorted(set(positions))
    if len(distinct) < 2:
        raise ValueError("the data needs at least two distinct problems (one is held out)")
    threshold = eval_fraction
    if threshold <= distinct[0]:  # nothing held out: hold out the lowest problem
        threshold = distinct[1]
    elif threshold > distinct[-1]:  # nothing left to train on: train on the highest problem
        threshold = distinct[-1]
    train = [p for p, x in zip(problems, positions, strict=True) if x >= threshold]
    held = [p for p, x in zip(problems, positions, strict=True) if x < threshold]
    return train, held


# ----------------------------------------------------------------------------- task


def _choice(field: str, value: Any, choices: tuple[str, ...] | list[str]) -> str:
    """`value` if it is one of `choices`, else ValueError naming the field and the choices."""
    if value not in choices:
        raise ValueError(f"{field} must be one of {', '.join(choices)}; got {value!r}")
    return value


def _number(field: str, value: Any, low: float, high: float, integer: bool = False) -> Any:
    """`value` if it is a number (an int when `integer`) in [low, high], else a ValueError."""
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{field} must be {kind} in [{low:g}, {high:g}]; got {value!r}")
    return value


class MathTask(Task):
    """Math problems from a local file, graded by the chosen grader; optionally with a Python tool.

    See the module docstring for the task arguments, the prompt and the train/eval split.
    With `tools="python"` the instance sets `stop = ("</tool>",)` and
    `max_turns = max_tool_calls + 1` (every allowed call plus the final answer).
    """

    name = "math"
    summary = "math problems from a file (task.data=PATH), graded answers, optional sandboxed Python tool"
    default_runtime = "local"  # the python variant runs code in the local sandbox
    max_new_tokens = 2048
    max_turns = 1
    stop = ()

    def __init__(
        self,
        data: str | None = None,
        grader: str = "auto",
        tools: str = "none",
        max_tool_calls: int = 8,
        eval_fraction: float = 0.1,
        python_cpu_seconds: float = DEFAULT_CPU_SECONDS,
        max_observation_chars: int = DEFAULT_OBSERVATION_CHARS,
    ):
        """Validate the arguments and load `data` (see the module docstring)."""
        if data is None or data == "":
            raise ValueError(MISSING_DATA)
        if not isinstance(data, str | Path):
            raise ValueError(f"data must be a file path; got {data!r}")
        self.tools = _choice("tools", tools, TOOL_MODES)
        requested = _choice("grader", grader, ["auto", *GRADERS])
        self.max_tool_calls = _number("max_tool_calls", max_tool_calls, 1, 1000, integer=True)
        self.eval_fraction = _number("eval_fraction", eval_fraction, 1e-9, 1 - 1e-9)
        self.python_cpu_seconds = _number("python_cpu_seconds", python_cpu_seconds, 1, 600)
        self.max_observation_chars = _number("max_observation_chars", max_observation_chars, 100, 10**6, True)
        self.data = Path(data)
        problems, self.grader_name = load_problems(self.data, requested)
        self.grader = GRADERS[self.grader_name]
        self.train, self.held_out = split_train_eval(problems, self.eval_fraction)
        if self.tools == "python":  # instance attributes shadow the Task ClassVars for this run
            self.stop = (TOOL_STOP,)
            self.max_turns = self.max_tool_calls + 1
        else:
            self.default_runtime = "none"

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training row, uniformly at random (with replacement), using `rng` only."""
        return rng.choice(self.train)

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """The first `n` held-out rows in an order shuffled by `seed` (all of them if n is larger);
        a file holds out a test split only (ValueError for the validation split)."""
        if held_out_split(split) is not Split.TEST:
            raise ValueError("task 'math' holds out a test split only (eval_fraction), no validation split")
        order = list(self.held_out)
        random.Random(f"math-eval-{seed}").shuffle(order)
        return order[:n]

    def make_env(self, problem: Problem) -> Env:
        """A one-turn episode (`tools="none"`) or a Python-tool episode (`tools="python"`)."""
        if self.tools == "none":
            return SingleTurnEnv(problem, self.grader)
        return MathToolEnv(
            problem,
            self.grader,
            max_tool_calls=self.max_tool_calls,
            limits=python_limits(self.python_cpu_seconds),
            max_observation_chars=self.max_observation_chars,
        )

    def demonstrations(self, rng: random.Random, n: int) -> list[list[Message]]:
        """Not available: this task is for pretrained models."""
        raise NotImplementedError(
            "task 'math' has no demonstrations: the embedded tiny character-level model cannot learn "
            "these problems; train a pretrained model instead (bench run --task math --model PATH)"
        )
