"""The learner leaves the engine child its core: threads = host share - engine threads, >= 1."""

from __future__ import annotations

import pytest

from bench.train.loop import learner_threads


@pytest.mark.parametrize(
    ("cpus", "ranks", "engine", "expected"),
    [(2, 1, 1, 1), (16, 1, 1, 15), (2, 2, 1, 1), (16, 2, 1, 7), (1, 1, 1, 1), (8, 0, 1, 7)],
)
def test_learner_threads(cpus, ranks, engine, expected):
    assert learner_threads(cpus, ranks, engine) == expected
