"""What a distributed launcher (torchrun, or `accelerate launch`, which runs torchrun's agent)
tells each process it starts, through the environment: read without importing torch, so that a
config can be checked against the world size before anything heavy loads."""

from __future__ import annotations

import os


def launched_world_size() -> int:
    """The world size a launcher set (WORLD_SIZE), 1 in a plain process."""
    return int(os.environ.get("WORLD_SIZE") or 1)


def is_launched() -> bool:
    """Whether a launcher started this process (WORLD_SIZE and RANK set)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ
