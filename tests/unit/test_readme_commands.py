"""README.md's Quickstart and test commands are what CI runs: `.ci/run` takes them from the
README's text (`scripts/readme_command.py`) and runs no pytest command of its own."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
try:
    import readme_command
finally:
    sys.path.pop(0)

README = (REPO / "README.md").read_text(encoding="utf-8")
CI_RUN = (REPO / ".ci" / "run").read_text(encoding="utf-8")


def bash_blocks(text: str) -> list[str]:
    """The bodies of every fenced ```bash block of a Markdown text."""
    return [body.strip() for body in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_the_readme_has_one_test_command_and_it_is_the_one_extracted():
    with_pytest = [block for block in bash_blocks(README) if "pytest" in block]
    assert with_pytest == [readme_command.readme_command(README, "test")]
    assert with_pytest[0].startswith("python3.11 -m venv .venv && . .venv/bin/activate && scripts/install.sh")


def test_the_quickstart_command_is_extracted():
    command = readme_command.readme_command(README, "quickstart")
    assert command in bash_blocks(README) and "bench run " in command and "pytest" not in command


def test_ci_runs_the_readme_commands_and_no_pytest_of_its_own():
    code = [line.split("#", 1)[0] for line in CI_RUN.splitlines()]  # comments may mention pytest
    assert not [line for line in code if "pytest" in line]
    calls = re.findall(r"^readme (\w+)$", CI_RUN, re.M)
    assert calls == ["quickstart", "test"]
    assert 'command="$(python3 scripts/readme_command.py "$1")"' in CI_RUN
    assert 'bash -e -c "$command"' in CI_RUN


def test_the_script_prints_the_command_and_refuses_unknown_names():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "readme_command.py"), "test"], capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == readme_command.readme_command(README, "test") + "\n"
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "readme_command.py"), "tests"], capture_output=True, text=True
    )
    assert done.returncode == 2 and "quickstart,test" in done.stderr


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no anchor here\n```bash\nls\n```\n", "exactly once .found 0."),
        ("Run the tests:\n```bash\na\n```\nRun the tests:\n```bash\nb\n```\n", "exactly once .found 2."),
        ("Run the tests:\n```text\nls\n```\n```bash\nls\n```\n", "must be a ```bash block"),
        ("Run the tests: and then\n", "must be a ```bash block"),
        ("Run the tests:\n```bash\nls\n", "not closed"),
        ("Run the tests:\n```bash\n\n```\n", "empty"),
    ],
)
def test_a_readme_without_exactly_one_test_block_is_an_error(text, error):
    with pytest.raises(readme_command.ReadmeCommandError, match=error):
        readme_command.readme_command(text, "test")


def test_the_block_after_the_anchor_is_taken_whole():
    text = "## Quickstart\n\nSome words:\n\n```bash\npython3.11 -m venv .venv && bench run\n```\n\n```bash\nx\n```\n"
    assert readme_command.readme_command(text, "quickstart") == "python3.11 -m venv .venv && bench run"
