"""Which columns of a dataset hold the prompt and the reference answer, and how to read them.

Recognised without a column map (the first prompt and the first answer column found, names
matched case-insensitively; a dotted name reads a field of a dict column):

    prompt:  problem, question, prompt
    answer:  answer, short answer, solution, completion, reward_model.ground_truth, ground_truth

which covers plain math files (`problem`/`answer`, GSM8K's `question`/`answer`,
IMOAnswerBench's `Short Answer`), TRL's layouts (`prompt` with `solution` or `completion`;
conversational `prompt`/`completion` lists of messages) and verl's (`prompt` as chat messages,
`reward_model.ground_truth`, with `data_source` kept in meta). `task.prompt_column` and
`task.answer_column` name them explicitly (dotted names allowed); anything else is a one-line
error naming the columns found and those two options.

Values: a prompt is a string (the problem text) or a list of `{"role", "content"}` messages
(used as the episode's initial messages as they are). An answer is a string or number, or a
list of messages (TRL's conversational completion: the last message's content). The math task
grades a solution text that marks its final answer (`\\boxed{...}`, `Answer: X`) against that
part and keeps the full text in `meta["solution"]`, and reads GSM8K's `#### N`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envs.base import Message

PROMPT_COLUMNS = ("problem", "question", "prompt")
ANSWER_COLUMNS = (
    "answer",
    "short answer",
    "solution",
    "completion",
    "reward_model.ground_truth",
    "ground_truth",
)
META_COLUMNS = ("data_source",)
"""Columns copied into each problem's meta when present (verl's dataset tag)."""


class LayoutError(ValueError):
    """A dataset whose prompt or answer column cannot be found or read (one line)."""


@dataclass(frozen=True)
class Record:
    """One row read through a layout: its text (for the split hash and display), its chat
    messages when the prompt was given as messages, the answer text and extra meta."""

    text: str
    messages: list[Message] | None
    answer: str
    meta: dict[str, Any] = field(default_factory=dict)


def _get(row: dict[str, Any], name: str) -> Any:
    """`row[name]`, where a dotted name reads into dict columns (`reward_model.ground_truth`)."""
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _has(row: dict[str, Any], name: str) -> bool:
    head, _, rest = name.partition(".")
    return head in row and (not rest or _get(row, name) is not None)


def find_column(row: dict[str, Any], candidates: tuple[str, ...]) -> str | None:
    """The actual (dotted) name of the first candidate column `row` holds, matched case-insensitively."""
    by_lower = {key.strip().lower(): key for key in row}
    for candidate in candidates:
        head, dot, rest = candidate.partition(".")
        if head in by_lower and _has(row, by_lower[head] + dot + rest):
            return by_lower[head] + dot + rest
    return None


def columns(
    first_row: dict[str, Any], prompt_column: str | None, answer_column: str | None, origin: str
) -> tuple[str, str]:
    """(prompt column, answer column) of a dataset whose first row is `first_row`: the explicit
    ones when given (checked), else recognised (module docstring); LayoutError otherwise."""
    found = ", ".join(first_row)
    chosen = []
    for option, explicit, candidates in (
        ("prompt_column", prompt_column, PROMPT_COLUMNS),
        ("answer_column", answer_column, ANSWER_COLUMNS),
    ):
        if explicit:
            if not _has(first_row, explicit):
                raise LayoutError(
                    f"{origin} has no column {explicit!r} (task.{option}); columns found: {found}"
                )
            chosen.append(explicit)
            continue
        name = find_column(first_row, candidates)
        if name is None:
            what = option.split("_")[0]
            raise LayoutError(
                f"{origin}: no {what} column recognised (one of {', '.join(candidates)}); columns found: "
                f"{found}; set --set task.{option}=NAME"
            )
        chosen.append(name)
    return chosen[0], chosen[1]


def _messages(value: list[Any], where: str) -> list[Message]:
    """A list of chat messages as `{"role", "content"}` dicts of strings (LayoutError otherwise)."""
    out = []
    for message in value:
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise LayoutError(
                f"{where}: a list must hold chat messages with 'role' and 'content'; got {message!r}"
            )
        out.append({"role": str(message["role"]), "content": str(message["content"])})
    if not out:
        raise LayoutError(f"{where}: empty list of messages")
    return out


def read_prompt(value: Any, where: str) -> tuple[str, list[Message] | None]:
    """(text, messages): a string prompt is its own text with no messages; a message list is used
    as it is, its text every message's `role: content` joined by newlines."""
    if isinstance(value, str):
        return value.strip(), None
    if isinstance(value, list | tuple):
        messages = _messages(list(value), where)
        return "\n".join(f"{m['role']}: {m['content']}" for m in messages), messages
    raise LayoutError(
        f"{where}: a prompt must be a string or a list of chat messages; got {type(value).__name__}"
    )


def read_answer(value: Any, where: str) -> str:
    """The answer as text: a string or number as written, a list of messages as its last content."""
    if isinstance(value, list | tuple):
        return _messages(list(value), where)[-1]["content"].strip()
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return str(value).strip()
    raise LayoutError(f"{where}: an answer must be a string, a number or chat messages; got {value!r}")


def read_records(
    rows: list[dict[str, Any]], prompt_column: str | None, answer_column: str | None, origin: str
) -> list[Record]:
    """Every row through the recognised or explicit layout (empty prompts or answers refused)."""
    if not rows:
        raise LayoutError(f"{origin} holds no rows")
    prompt_col, answer_col = columns(rows[0], prompt_column, answer_column, origin)
    records = []
    for i, row in enumerate(rows):
        where = f"row {i} of {origin}"
        text, messages = read_prompt(_get(row, prompt_col), f"{where}, column {prompt_col!r}")
        raw = _get(row, answer_col)
        answer = "" if raw is None else read_answer(raw, f"{where}, column {answer_col!r}")
        if not text or not answer:
            raise LayoutError(f"{where} has an empty {prompt_col!r} or {answer_col!r}")
        meta = {name: row[name] for name in META_COLUMNS if row.get(name) is not None}
        records.append(Record(text, messages, answer, meta))
    return records
