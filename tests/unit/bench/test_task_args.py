"""`--set task.X=V` values are converted to the task constructor's annotated types."""

import pytest

from bench.config import build_config
from bench.config_values import coerce_task_args, parse_set_options
from bench.errors import UsageError


def _task_args(task: str, *sets: str) -> dict:
    overrides = parse_set_options([f"task.{item}" for item in sets])
    return build_config({"task": task, **overrides}).task_args


def test_booleans_in_any_spelling_become_bools():
    # TOML parses `False` (capital F) as a string; the constructor's `bool` annotation decides
    assert _task_args("agent", "require_lookups=False") == {"require_lookups": False}
    assert _task_args("agent", "require_lookups=yes") == {"require_lookups": True}
    assert _task_args("drift", "cycle=0") == {"cycle": False}


def test_numbers_follow_the_annotation():
    args = _task_args("agent", "tool_latency=1", "max_vars=7")
    assert args == {"tool_latency": 1.0, "max_vars": 7}
    assert isinstance(args["tool_latency"], float) and isinstance(args["max_vars"], int)


def test_optional_strings_accept_none_and_stringify_values():
    assert coerce_task_args("swe", {"runtime": "none"}) == {"runtime": None}
    assert coerce_task_args("swe", {"dataset": "swe-synth"}) == {"dataset": "swe-synth"}


@pytest.mark.parametrize(
    "task, item, message",
    [
        ("drift", "cycle=maybe", "task.cycle: expected true or false, got 'maybe'"),
        ("arith", "max_operands=2.5", "task.max_operands: expected int, got 2.5"),
        ("arith", "p_more=high", "task.p_more: expected float, got 'high'"),
    ],
)
def test_a_value_of_the_wrong_type_names_the_task_argument(task, item, message):
    with pytest.raises(UsageError, match=message.replace(".", r"\.")):
        _task_args(task, item)


def test_an_unknown_argument_names_the_valid_ones_with_a_did_you_mean():
    with pytest.raises(
        UsageError, match="task.nope: unknown argument of task 'arith'; valid arguments: demo_error_rate"
    ):
        coerce_task_args("arith", {"nope": "1"})
    with pytest.raises(
        UsageError, match="task.max_operand: unknown argument .* \\(did you mean 'max_operands'\\?\\)"
    ):
        _task_args("arith", "max_operand=1")
