"""An unknown option is answered from the options of the command given: a close one is
suggested, another command's option is named as such (not suggested as itself)."""

from __future__ import annotations

import pytest

from bench.cli import build_parser


def _error_line(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err.strip()


def test_a_misspelt_option_suggests_the_commands_own(capsys):
    line = _error_line(capsys, ["run", "--algo", "sao", "--stepz", "3"])
    assert (
        line
        == "bench: error: unrecognized arguments: --stepz 3 (did you mean --steps?) (see `bench run --help`)"
    )


def test_another_commands_option_is_named_not_suggested_as_itself(capsys):
    # `--no-progress` belongs to `bench run`, not to `bench compare`: the old hint said
    # "(did you mean --no-progress?)" to the user who had typed exactly that
    line = _error_line(capsys, ["compare", "--algos", "sao", "--no-progress"])
    assert "did you mean" not in line
    assert "(--no-progress is not an option of `bench compare`)" in line
    assert line.endswith("(see `bench compare --help`)")


def test_a_retired_option_says_what_replaced_it(capsys):
    line = _error_line(capsys, ["compare", "--algos", "sao", "--lease-seconds", "30"])
    assert "(--lease-seconds is retired: a run is taken over as soon as its holder's process is gone" in line
    assert "did you mean" not in line
