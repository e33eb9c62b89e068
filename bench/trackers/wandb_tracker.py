"""Weights & Biases: one W&B run per run directory (project $WANDB_PROJECT, default "rl-bench"),
grouped as the experiment is: a comparison's runs share its group (the comparison's name), their
job type is their arm and their name `<arm>-s<seed>` (a sweep's likewise, named by trial slot).

Offline use: WANDB_MODE=offline writes RUN_DIR/wandb/offline-run-*, for `wandb sync` later. A
resumed run continues the same W&B run (its id is derived from the run directory's path), and so
does the final evaluation and the report's numbers, which go to the run's summary.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from results.experiments import RunPlace


class WandbTracker:
    """wandb.init with the run's config and place, wandb.log per record, finish at the end."""

    def __init__(self, run_dir: Path, config: dict[str, Any], place: RunPlace) -> None:
        import wandb

        run_id = hashlib.sha1(str(run_dir.resolve()).encode()).hexdigest()[:16]
        tags = [f"arm:{place.arm}"] + ([] if place.seed is None else [f"seed:{place.seed}"])
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "rl-bench"),
            group=place.group,
            job_type=place.arm,
            name=place.name,
            tags=tags,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            config=config,
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's numbers at `step`."""
        self.run.log(metrics, step=step)

    def summarize(self, step: int, metrics: dict[str, float]) -> None:
        """Numbers about the whole run (its final evaluation, the report's) into its summary."""
        self.run.summary.update(metrics)

    def close(self) -> None:
        """Finish the W&B run (uploads, or closes the offline files)."""
        self.run.finish()
