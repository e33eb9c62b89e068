"""What a verdict row shows: one vocabulary for the verdict table, the stability rows and the
reports' bottom lines."""

from __future__ import annotations

from enum import StrEnum


class Finding(StrEnum):
    """What a row shows (`results.report.verdicts`, rule 3; `results.report.stability_verdicts`)."""

    SAME = "same direction, at toy scale"
    OPPOSITE = "opposite direction, at toy scale"
    DISAGREE = "no direction shown: the intervals disagree"
    NOT_SHOWN = "no direction shown"
    NEEDS_RERUN = "needs the re-run"
    NOT_RUN = "not run yet"
