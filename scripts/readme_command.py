"""Prints a command README.md tells a user to run, taken from the README's text, so that CI runs
exactly that command (`.ci/run`) and the two cannot drift apart.

    python3 scripts/readme_command.py test          # the block after "Run the tests:"
    python3 scripts/readme_command.py quickstart    # the block of the "## Quickstart" section
    bash -e -c "$(python3 scripts/readme_command.py test)"

A command is the first fenced ```bash block after its anchor, which must occur exactly once in
README.md; anything else (no anchor, two, another fence first) is an error, exit code 1.
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
ANCHORS = {"quickstart": "## Quickstart", "test": "Run the tests:"}
"""Command name -> the README text its block follows."""
FENCE = "```"


class ReadmeCommandError(ValueError):
    """README.md does not hold the asked-for command in the expected form."""


def readme_command(readme: str, name: str) -> str:
    """The command `name` (a key of ANCHORS) in the text `readme`, without its fence."""
    anchor = ANCHORS[name]
    if readme.count(anchor) != 1:
        raise ReadmeCommandError(
            f"README.md must contain {anchor!r} exactly once (found {readme.count(anchor)})"
        )
    after = readme.split(anchor, 1)[1]
    start = after.find(FENCE)
    if start < 0 or not after.startswith(FENCE + "bash\n", start):
        raise ReadmeCommandError(f"the first fenced block after {anchor!r} must be a ```bash block")
    body = after[start + len(FENCE + "bash\n") :]
    end = body.find(FENCE)
    if end < 0:
        raise ReadmeCommandError(f"the ```bash block after {anchor!r} is not closed")
    command = body[:end].strip()
    if not command:
        raise ReadmeCommandError(f"the ```bash block after {anchor!r} is empty")
    return command


def main(argv: list[str]) -> int:
    """Print the command named by argv[0]; usage errors and README errors on stderr, exit 2 / 1."""
    if len(argv) != 1 or argv[0] not in ANCHORS:
        print(f"usage: readme_command.py {{{','.join(ANCHORS)}}}", file=sys.stderr)
        return 2
    try:
        print(readme_command(README.read_text(encoding="utf-8"), argv[0]))
    except ReadmeCommandError as exc:
        print(f"readme_command.py: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
