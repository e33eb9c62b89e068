"""Provenance of runs and evaluations: git commit and dirty flag, package versions, hardware, seed."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "accelerate", "trl", "vllm", "math-verify", "datasets", "optuna")
"""Packages whose installed versions every env.json and eval summary records."""


def _git(*args: str) -> str | None:
    try:
        root = Path(__file__).resolve().parents[1]
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def environment_info(seed: int) -> dict[str, Any]:
    """Provenance of a run: git commit and dirty flag, package versions, hardware, seed."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    import torch

    return {
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain")),
        "python": sys.version.split()[0],
        "packages": versions,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "seed": seed,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
