"""The real benchmark files the tests read: the full published copies where they sit beside the
checkout (`../shared/data/`), else the samples shipped in tests/fixtures/data/ (licences and
the choice of rows in its README.md). Either way the test runs; `DataCopy` says which copy it
got and what that copy holds, so that a test pins the numbers of the copy it read."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FULL_DATA = TESTS.parents[1] / "shared" / "data"
"""The full copies (IMOAnswerBench, GSM8K), beside the checkout where a machine keeps them."""
SAMPLE_DATA = TESTS / "fixtures" / "data"
"""A few dozen rows of each, shipped with the tests."""


class Kind(StrEnum):
    """Which copy of a benchmark file a test read."""

    FULL = "full"
    """The published set."""
    SAMPLE = "sample"
    """The rows shipped with the tests."""


ROWS = {
    "imobench/answerbench_v2.csv": {Kind.FULL: 400, Kind.SAMPLE: 39},
    "gsm8k/test.jsonl": {Kind.FULL: 1319, Kind.SAMPLE: 51},
}
"""Rows of each file (relative path) in each copy."""


@dataclass(frozen=True)
class DataCopy:
    """One benchmark file as the tests read it."""

    path: Path
    kind: Kind
    rows: int
    """Rows (problems) in this copy."""


def benchmark_copy(relative: str) -> DataCopy:
    """The full copy of `relative` (e.g. "gsm8k/test.jsonl") when present, else the sample."""
    full = FULL_DATA / relative
    kind, path = (Kind.FULL, full) if full.is_file() else (Kind.SAMPLE, SAMPLE_DATA / relative)
    return DataCopy(path=path, kind=kind, rows=ROWS[relative][kind])


def copies_in_use() -> str:
    """One line saying which copies the tests read."""
    kinds = {relative: benchmark_copy(relative).kind for relative in ROWS}
    if set(kinds.values()) == {Kind.FULL}:
        return f"the full copies in {FULL_DATA}"
    if set(kinds.values()) == {Kind.SAMPLE}:
        return (
            f"the samples in {SAMPLE_DATA.relative_to(TESTS.parent)} "
            f"(every row is graded where the full copies sit in {FULL_DATA})"
        )
    return ", ".join(f"{relative}: {kind}" for relative, kind in kinds.items())
