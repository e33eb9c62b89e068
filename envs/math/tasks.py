"""`math`: training on a dataset of math problems, with or without a Python tool.

For real (pretrained) models, `--model PATH`; the embedded character-level model cannot do
this task, so it has no demonstrations. Task arguments (`--set task.ARG=VALUE`):

- `dataset` (required): a local CSV, JSON, JSONL, parquet or arrow file, a dataset directory
  (`save_to_disk`, or a folder of data files), or a hub name `org/name[:config]` (offline: from
  the local `datasets` cache; `envs.dataset_source`). `data` is its former name, still read.
- `split` (default `train`): the split of a dataset directory or hub dataset to read.
- `prompt_column`, `answer_column`: where the prompt and the reference answer are. Unset, the
  layout is recognised (`envs.math.layouts`): plain `problem`/`question` + `answer`, TRL's
  `prompt` + `solution`/`completion` (conversational lists too), verl's chat `prompt` +
  `reward_model.ground_truth` (+ `data_source`). When every answer contains `####` the data
  is read as GSM8K: the reference becomes the number after it and the full solution is kept
  in `meta["solution"]`; a solution that marks its final answer (`\\boxed{}`, `Answer: X`) is
  graded against that part.
- `grader` in {auto, integer, gsm8k, symbolic} (`envs.math.graders`). `auto` picks gsm8k for
  GSM8K-style files, integer when every answer is an integer (AIME-style), else symbolic
  (math-verify with the counted string fallback; IMOAnswerBench-style). An explicit grader
  is checked against every answer when the task is built.
- `tools` in {none, python}: `python` is the tool-integrated variant (`envs.math.python_tool`):
  up to `max_tool_calls` (default 8) sandboxed Python runs of `python_cpu_seconds` (default 5)
  each, then a final answer. `none` is one turn. The tool variant takes string prompts only.
- `system_prompt`: a system message put before every prompt that has none (one-turn variant;
  the tool variant has its own).
- `eval_fraction` (default 0.1): the share of rows held out for evaluation (the test split,
  benchmark `math`).
- `validation_fraction` (default 0: none): a further share of rows held out from training for
  tuning (the validation split, benchmark `math-val`, a sweep's default objective); the test
  split is the same with or without it.

Prompt: a string prompt is the problem, a blank line, then "Please reason step by step, and
put your final answer within \\boxed{}." (the wording of the benchmarks' `BOXED_TEMPLATE`, so
training and `bench eval` prompts match); a prompt given as chat messages (TRL's conversational
layout, verl's) is used as it is. The tool variant adds a system prompt describing the tool.
The reward is 1 for a correct final answer, else 0.

Train/eval separation (held-out rows by content hash, within the one split read; a dataset's
own test split is not used): a row is held out when sha256("math-split-v1" + its problem text
with whitespace collapsed; a message prompt's text is its `role: content` lines), read as a
number in [0, 1), is below `eval_fraction`. The split depends only on the problem text, not on
row order, file or seed, and duplicated problems land on the same side, so training never draws
a held-out problem. If the hash leaves one side empty, the row nearest the boundary moves over
(a dataset needs at least two distinct problems). `sample_problem` draws uniformly from the
training rows; `eval_problems(n, seed)` returns the first n held-out rows in an order shuffled
by `seed` (all of them when n exceeds their number). The validation split is the training rows
whose position lies less than validation_fraction above the lowest training row's (at least that
row; at least one row is left to train on), so it shares no problem with either side.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from envs.base import Env, Grader, Message, Problem, SingleTurnEnv, Task
from envs.dataset_source import read_dataset
from envs.math.graders import (
    extract_final_answer,
    grade_gsm8k,
    grade_integer,
    grade_symbolic,
    gsm8k_reference,
)
from envs.math.layouts import read_records
from envs.math.python_tool import DEFAULT_CPU_SECONDS, DEFAULT_OBSERVATION_CHARS, MathToolEnv, python_limits
from envs.splits import Split, hash_position, held_out_split
from envs.tools import TOOL_STOP

GRADERS: dict[str, Grader] = {"integer": grade_integer, "gsm8k": grade_gsm8k, "symbolic": grade_symbolic}
"""Grader name (task arg `grader`) -> grader; `auto` chooses among these from the data."""

TOOL_MODES = ("none", "python")
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
"""Appended to every string prompt (same wording as `benchmarks.math_sets.BOXED_TEMPLATE`)."""

MISSING_DATA = (
    "task 'math' needs --set task.dataset=NAME_OR_PATH (a local csv/json/jsonl/parquet/arrow file, a "
    "dataset directory or a hub dataset name, e.g. ../shared/data/gsm8k/test.jsonl)"
)
_SPLIT_SALT = "math-split-v1"


# ----------------------------------------------------------------------------- data


def _is_integer(answer: str) -> bool:
    """Whether `grade_integer` accepts `answer` as a reference (it raises otherwise)."""
    try:
        grade_integer("", answer)
    except ValueError:
        return False
    return True


def _check_answers(answers: list[str], grader: str, origin: str) -> None:
    """Refuse an explicit grader that cannot read some reference answer (first bad row named)."""
    for i, answer in enumerate(answers):
        if grader == "integer" and not _is_integer(answer):
            raise ValueError(f"grader='integer' but row {i} of {origin} has answer {answer!r}")
        if grader == "gsm8k":
            try:
                gsm8k_reference(answer)
            except ValueError:
                raise ValueError(f"grader='gsm8k' but row {i} of {origin} has answer {answer!r}") from None


def _references(answers: list[str]) -> tuple[list[str], list[str | None], bool]:
    """(references, full solutions or None, GSM8K schema?): the number after `####` when every
    answer has one, else the final answer of an answer that marks one (a solution or completion:
    `extract_final_answer`, the last box or `Answer: X`), else the answer itself."""
    if all("####" in a for a in answers):
        return [a.rsplit("####", 1)[1].strip() for a in answers], list(answers), True
    references, solutions = [], []
    for answer in answers:
        final = extract_final_answer(answer)
        marked = bool(final) and final != answer
        references.append(final if marked else answer)
        solutions.append(answer if marked else None)
    return references, solutions, False


def load_problems(
    source: str | Path,
    grader: str = "auto",
    split: str = "train",
    prompt_column: str | None = None,
    answer_column: str | None = None,
) -> tuple[list[Problem], str]:
    """All rows of the dataset `source` as Problems (source order, keys `math-<row>`) and the
    grader name to use. See the module docstring for the sources, layouts, GSM8K and `auto`."""
    origin = str(source)
    records = read_records(read_dataset(source, split, "task.split"), prompt_column, answer_column, origin)
    answers, solutions, gsm8k_schema = _references([r.answer for r in records])
    if grader == "auto":
        if gsm8k_schema:
            grader = "gsm8k"
        else:
            grader = "integer" if all(_is_integer(a) for a in answers) else "symbolic"
    _check_answers(answers, grader, origin)
    problems = []
    for i, (record, answer, solution) in enumerate(zip(records, answers, solutions, strict=True)):
        meta: dict[str, Any] = {"row": i, "problem": record.text, **record.meta}
        if solution:
            meta["solution"] = solution
        if record.messages is not None:
            meta["messages"] = record.messages
            prompt = next(
                (m["content"] for m in reversed(record.messages) if m["role"] == "user"), record.text
            )
        else:
            prompt = f"{record.text}\n\n{INSTRUCTION}"
        problems.append(Problem(key=f"math-{i:05d}", prompt=prompt, answer=answer, meta=meta))
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
    return _split_at(problems, positions, threshold)


def _split_at(
    problems: list[Problem], positions: list[float], threshold: float
) -> tuple[list[Problem], list[Problem]]:
    """(the problems at or above `threshold`, those below it), by their `split_position`."""
    above = [p for p, x in zip(problems, positions, strict=True) if x >= threshold]
    below = [p for p, x in zip(problems, positions, strict=True) if x < threshold]
    return above, below


def split_validation(train: list[Problem], fraction: float) -> tuple[list[Problem], list[Problem]]:
    """(train, validation) of the training rows: validation holds those whose `split_position`
    is among the lowest `fraction` of [0, 1) above the test threshold, i.e. below min + fraction
    (at least the lowest distinct problem; equal texts stay together); none when `fraction` is
    0. ValueError when no distinct problem would be left to train on."""
    if fraction <= 0:
        return train, []
    positions = [split_position(p.meta["problem"]) for p in train]
    distinct = sorted(set(positions))
    if len(distinct) < 2:
        raise ValueError(
            "validation_fraction needs at least two distinct training problems (one is held out)"
        )
    threshold = max(distinct[0] + fraction, distinct[1])  # the lowest problem at least
    if threshold > distinct[-1]:
        raise ValueError(
            f"validation_fraction {fraction:g} leaves no training problem; lower it (or eval_fraction)"
        )
    return _split_at(train, positions, threshold)


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
    """Math problems from a dataset, graded by the chosen grader; optionally with a Python tool.

    See the module docstring for the task arguments, the prompt and the train/eval split.
    With `tools="python"` the instance sets `stop = ("</tool>",)` and
    `max_turns = max_tool_calls + 1` (every allowed call plus the final answer).
    """

    name = "math"
    summary = (
        "math problems from a dataset (task.dataset=PATH or hub name), graded answers, optional sandboxed "
        "Python tool"
    )
    default_runtime = "local"  # the python variant runs code in the local sandbox
    max_new_tokens = 2048
    max_turns = 1
    stop = ()

    def __init__(
        self,
        dataset: str | None = None,
        split: str = "train",
        prompt_column: str | None = None,
        answer_column: str | None = None,
        system_prompt: str | None = None,
        grader: str = "auto",
        tools: str = "none",
        max_tool_calls: int = 8,
        eval_fraction: float = 0.1,
        validation_fraction: float = 0.0,
        python_cpu_seconds: float = DEFAULT_CPU_SECONDS,
        max_observation_chars: int = DEFAULT_OBSERVATION_CHARS,
        data: str | None = None,
    ):
        """Validate the arguments and load `dataset` (see the module docstring; `data` is the
        former name of `dataset`)."""
        if data not in (None, "") and dataset not in (None, ""):
            raise ValueError("set task.dataset only (task.data is its former name)")
        dataset = dataset if dataset not in (None, "") else data
        if dataset is None or dataset == "":
            raise ValueError(MISSING_DATA)
        if not isinstance(dataset, str | Path):
            raise ValueError(f"dataset must be a path or a hub dataset name; got {dataset!r}")
        self.tools = _choice("tools", tools, TOOL_MODES)
        requested = _choice("grader", grader, ["auto", *GRADERS])
        self.max_tool_calls = _number("max_tool_calls", max_tool_calls, 1, 1000, integer=True)
        self.eval_fraction = _number("eval_fraction", eval_fraction, 1e-9, 1 - 1e-9)
        self.validation_fraction = _number("validation_fraction", validation_fraction, 0, 1 - 1e-9)
        self.python_cpu_seconds = _number("python_cpu_seconds", python_cpu_seconds, 1, 600)
        self.max_observation_chars = _number("max_observation_chars", max_observation_chars, 100, 10**6, True)
        self.system_prompt = system_prompt or None
        self.dataset = str(dataset)
        problems, self.grader_name = load_problems(dataset, requested, split, prompt_column, answer_column)
        self.grader = GRADERS[self.grader_name]
        self.train, self.held_out = split_train_eval(problems, self.eval_fraction)
        self.train, self.validation = split_validation(self.train, self.validation_fraction)
        if self.tools == "python":  # instance attributes shadow the Task ClassVars for this run
            if any("messages" in p.meta for p in problems):
                raise ValueError(
                    "tools='python' takes string prompts; this dataset's prompts are chat messages"
                )
            if self.system_prompt is not None:
                raise ValueError("tools='python' has its own system prompt (the tool's); drop system_prompt")
            self.stop = (TOOL_STOP,)
            self.max_turns = self.max_tool_calls + 1
        else:
            self.default_runtime = "none"

    def sample_problem(self, rng: random.Random) -> Problem:
        """A training row, uniformly at random (with replacement), using `rng` only."""
        return rng.choice(self.train)

    def eval_problems(self, n: int, seed: int = 0, split: str = Split.TEST) -> list[Problem]:
        """The first `n` rows of the `split` bucket in an order shuffled by `seed` (all of them if
        n is larger): the test rows (eval_fraction), or the validation rows, which exist only
        with validation_fraction > 0 (ValueError otherwise)."""
        if held_out_split(split) is Split.TEST:
            order = list(self.held_out)
        elif self.validation:
            order = list(self.validation)
        else:
            raise ValueError(
                "task 'math' holds out a validation split only when asked: set task.validation_fraction "
                "(e.g. 0.1)"
            )
        random.Random(f"math-eval-{seed}").shuffle(order)
        return order[:n]

    def make_env(self, problem: Problem) -> Env:
        """A one-turn episode (`tools="none"`) or a Python-tool episode (`tools="python"`)."""
        if self.tools == "none":
            return SingleTurnEnv(problem, self.grader, self.system_prompt)
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
