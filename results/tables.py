"""Plain-text tables for the terminal (one implementation for every command)."""

from __future__ import annotations

from typing import Any


def print_table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print rows as a left-aligned table with a header and a rule."""
    widths = {c: max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    print("  ".join("-" * widths[c] for c in columns))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(widths[c]) for c in columns))
