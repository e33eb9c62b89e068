"""Weights & Biases: one W&B run per run directory (project $WANDB_PROJECT, default "rl-bench").

Offline use: WANDB_MODE=offline writes RUN_DIR/wandb/offline-run-*, for `wandb sync` later. A
resumed run continues the same W&B run (its id is derived from the run directory's path).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any


class WandbTracker:
    """wandb.init with the run's config, wandb.log per record, finish at the end."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import wandb

        run_id = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rl-bench"),
            name=run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's numbers at `step`."""
        self.run.log(metrics, step=step)

    def close(self) -> None:
        """Finish the W&B run (uploads, or closes the offline files)."""
        self.run.finish()
