"""One seeding function for the process, and per-sample seeds derived from their coordinates."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA) for the whole process."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def derive_seed(seed: int, *coords: int | str) -> int:
    """A 63-bit seed determined by the run seed and coordinates, e.g. (step, prompt, sample).

    Hash-based so nearby coordinates give unrelated streams and the result does not depend on
    the order in which samples happen to be drawn (which varies in asynchronous runs).
    """
    text = ":".join(str(c) for c in (seed, *coords))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little") >> 1
