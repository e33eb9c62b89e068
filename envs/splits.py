"""Held-out splits by content: a problem's split is a function of the problem itself.

A task whose problems are generated (arith, agent, drift, swe-synth) draws training problems,
validation problems (tuning, checkpoint selection) and test problems (reported results) from
one distribution. Separate random streams do not keep them apart: a problem drawn in the test
stream is also drawn in training whenever the space is small enough (in arith's, 101 of 200
test problems occurred in a 32,000-draw training stream). So the space itself is partitioned:

    position(problem) = sha256(salt NUL content) read as a number in [0, 1)
    test        if position < test share
    validation  if position < test share + validation share
    train       otherwise

Training draws reject every problem outside the train bucket; a held-out set draws from the
task's distribution restricted to its bucket. Equal contents land in the same bucket whatever
the stream, seed or key, so no evaluation or validation problem can be trained on, and the
validation and test sets are disjoint. The bucket is independent of a problem's difficulty
(the hash ignores it), so each bucket keeps the task's mix of lengths, and every part of the
space keeps (1 - test - validation) of its problems for training.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

T = TypeVar("T")


class Split(StrEnum):
    """Which part of a task's problem space a problem belongs to."""

    TRAIN = "train"
    VALIDATION = "validation"  # tuning and checkpoint selection only, never reported
    TEST = "test"


HELD_OUT = (Split.TEST, Split.VALIDATION)
"""The splits `Task.eval_problems` serves."""

MAX_REJECTIONS = 100_000
"""Consecutive draws outside the wanted bucket after which a draw gives up (a bucket that small
is a configuration error, e.g. a problem space of a handful of problems)."""


def hash_position(salt: str, content: str) -> float:
    """sha256(`salt` NUL `content`), its first 8 bytes read as a number in [0, 1)."""
    digest = hashlib.sha256(f"{salt}\0{content}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class ContentSplit:
    """A partition of a problem space into train / validation / test buckets by content hash.

    `salt` names the partition (changing it moves every problem: bump the benchmark versions);
    `test` and `validation` are the shares of the space held out for each.
    """

    salt: str
    test: float
    validation: float

    def __post_init__(self):
        """Shares must leave room for training."""
        if not (0 < self.test and 0 <= self.validation and self.test + self.validation < 1):
            raise ValueError(f"split shares must satisfy 0 < test, 0 <= validation, sum < 1: {self}")

    def of(self, content: str) -> Split:
        """The bucket of a problem whose canonical content is `content`."""
        x = hash_position(self.salt, content)
        if x < self.test:
            return Split.TEST
        return Split.VALIDATION if x < self.test + self.validation else Split.TRAIN

    def draw_in(self, bucket: Split, draw: Callable[[], T], content: Callable[[T], str]) -> T:
        """The first of repeated `draw()`s whose `content` falls in `bucket` (rejection sampling:
        the task's distribution restricted to the bucket); RuntimeError after MAX_REJECTIONS."""
        for _ in range(MAX_REJECTIONS):
            item = draw()
            if self.of(content(item)) is bucket:
                return item
        raise RuntimeError(f"{MAX_REJECTIONS} draws in a row fell outside the {bucket} bucket of {self.salt}")


def held_out_split(split: str) -> Split:
    """`split` as a held-out Split (ValueError naming the choices otherwise)."""
    try:
        value = Split(split)
    except ValueError:
        value = None
    if value not in HELD_OUT:
        raise ValueError(f"unknown held-out split {split!r}; choose one of {', '.join(HELD_OUT)}")
    return value
