"""Where the harness caches models on disk (base checkpoints, converted packaged models)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache root: `BENCH_CACHE_DIR` when set, else the user cache dir of rl-bench."""
    if os.environ.get("BENCH_CACHE_DIR"):
        return Path(os.environ["BENCH_CACHE_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rl-bench"))
