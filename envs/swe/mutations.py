"""Single-line bug injection for the synthetic SWE warm-start: every one-edit mutant of a
line of Python, grouped by bug kind (see `envs.swe.synthetic` for how they are used)."""

from __future__ import annotations

import re

_SITE = re.compile(r"\*\*|//|<=|>=|==|!=|[-+*/%<>]|\b\d+\b|\b[A-Za-z_]\w*\b|'[^']*'")
_SWAPS = {
    "+": ("-", "*"),
    "-": ("+",),
    "*": ("+", "-"),
    "/": ("//", "*"),
    "//": ("/", "%"),
    "%": ("//",),
    "**": ("*",),
    "<": (">", "<="),
    ">": ("<", ">="),
    "<=": ("<", ">="),
    ">=": (">", "<="),
    "==": ("!=",),
    "!=": ("==",),
}
_WORDS = {
    "and": "or",
    "or": "and",
    "min": "max",
    "max": "min",
    "any": "all",
    "all": "any",
    "True": "False",
    "False": "True",
    "upper": "lower",
    "lower": "upper",
    "append": "extend",
    "extend": "append",
}
_CHARS = ("-", "_", " ", "")


def mutations_by_kind(line: str, params: tuple[str, ...]) -> dict[str, list[str]]:
    """Every single edit of a body `line`, by bug kind (see the module docstring). Edits may
    be invalid Python or no-ops; callers filter those. Kinds are drawn uniformly by
    `make_bug`, so kinds with many sites (e.g. +-1) do not crowd out the others."""
    kinds: dict[str, list[str]] = {
        "operator": [],
        "constant": [],
        "name": [],
        "off_by_one": [],
        "structure": [],
    }
    for match in _SITE.finditer(line, len(line) - len(line.lstrip())):
        token, (a, b) = match.group(), match.span()
        if token in _SWAPS or token in _WORDS:
            kind, options = "operator", _SWAPS.get(token) or (_WORDS[token],)
        elif token.isdigit():
            kind, options = "constant", tuple(str(v) for v in (int(token) + 1, int(token) - 1) if v >= 0)
        elif token in params:
            kind, options = "name", tuple(p for p in params if p != token)
        elif token.startswith("'") and len(token) <= 3:
            kind, options = "constant", tuple(f"'{c}'" for c in _CHARS if f"'{c}'" != token)
        else:
            continue
        kinds[kind] += [line[:a] + option + line[b:] for option in options]
    off = kinds["off_by_one"]
    off += [line[: m.start()] + line[m.end() :] for m in re.finditer(r" [-+] 1\b", line)]  # drop a +-1
    for m in re.finditer(r"[A-Za-z_)\]](?=[)\],])", line):  # add a +-1 after a name or bracket
        off += [line[: m.end()] + term + line[m.end() :] for term in (" - 1", " + 1")]
    structure = kinds["structure"]
    for m in re.finditer(r"\((\w+), (\w+)\)", line):  # swap two call arguments
        structure.append(f"{line[: m.start()]}({m.group(2)}, {m.group(1)}){line[m.end() :]}")
    for m in re.finditer(r"(?<=[ (])\(([^()]+)\)(?= [-+*/%])", line):  # drop grouping parentheses
        structure.append(line[: m.start()] + m.group(1) + line[m.end() :])
    if "not " in line:
        structure.append(line.replace("not ", "", 1))
    return {k: [m for m in dict.fromkeys(v) if m != line] for k, v in kinds.items()}


def mutations(line: str, params: tuple[str, ...]) -> list[str]:
    """All edits of `mutations_by_kind`, in one list (kind order, no duplicates)."""
    return list(dict.fromkeys(m for ms in mutations_by_kind(line, params).values() for m in ms))
