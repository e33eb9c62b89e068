"""Plain-text tables for the terminal (one implementation for every command)."""

from __future__ import annotations

from typing import Any


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Rows as a left-aligned table with a header and a rule."""
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns), "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print rows as a left-aligned table with a header and a rule."""
    print(format_table(rows, columns))
