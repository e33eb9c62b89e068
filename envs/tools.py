"""The tool-call format shared by every tool-using environment (agent, math with Python, SWE).

One call per assistant turn, written as

    <tool>NAME ARGUMENT</tool>

`NAME` is a word ([A-Za-z_][A-Za-z0-9_-]*); `ARGUMENT` is everything after the first space or
newline up to `</tool>` (it may span lines, e.g. a Python program). The rollout engine stops
at `</tool>` (`TOOL_STOP`), the env runs the tool and the result comes back as the next
observation, wrapped as `<result>TEXT</result>` (`format_result`). Text before `<tool>` is the
model's reasoning and is ignored by the env. A turn without a tool call is the model's final
answer. Examples:

    <tool>get x7</tool>                   -> <result>x7=5</result>
    <tool>python print(2**10)</tool>      -> <result>1024</result>
    <tool>view src/calc.py 1-20</tool>    -> <result>1: def add(a, b): ...</result>

The format is deliberately short: the embedded tiny model is character-level, so every
character of the protocol is a token it has to learn.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOL_OPEN = "<tool>"
TOOL_STOP = "</tool>"
RESULT_OPEN = "<result>"
RESULT_CLOSE = "</result>"

_CALL = re.compile(r"<tool>([A-Za-z_][A-Za-z0-9_-]*)(?:[ \n](.*?))?</tool>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One parsed call: the tool's `name` and its raw `argument` text (may be empty)."""

    name: str
    argument: str


class MalformedToolCall(ValueError):
    """The turn opens `<tool>` but does not form a valid call; the message says why."""


def parse_tool_call(action: str) -> ToolCall | None:
    """The tool call in one assistant turn, or None when the turn has no `<tool>` at all.

    The first complete call counts. Raises MalformedToolCall when `<tool>` appears but no
    well-formed call follows (unclosed, or a bad name), so the env can tell the model.
    """
    if TOOL_OPEN not in action:
        return None
    match = _CALL.search(action)
    if match is None:
        if TOOL_STOP not in action[action.index(TOOL_OPEN) :]:
            raise MalformedToolCall(f"tool call not closed with {TOOL_STOP}")
        raise MalformedToolCall("tool call must start with a tool name: <tool>NAME ARGUMENT</tool>")
    return ToolCall(name=match.group(1), argument=(match.group(2) or "").strip("\n"))


def format_tool_call(name: str, argument: str = "") -> str:
    """The text of a call, as demonstrations write it: `<tool>name argument</tool>`."""
    return f"{TOOL_OPEN}{name}{' ' + argument if argument else ''}{TOOL_STOP}"


def format_result(text: str) -> str:
    """The observation text of a tool's output: `<result>text</result>` and a newline."""
    return f"{RESULT_OPEN}{text}{RESULT_CLOSE}\n"
