"""trackio: local-first tracking (project $TRACKIO_PROJECT, default "rl-bench"; stored under
$TRACKIO_DIR; `trackio show` opens the dashboard)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


class TrackioTracker:
    """trackio.init with the run's config, log per record, finish at the end."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        import trackio

        self.run = trackio.init(
            project=os.environ.get("TRACKIO_PROJECT", "rl-bench"),
            name=run_dir.name,
            config=config,
            resume="allow",
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's numbers at `step`."""
        self.run.log(metrics, step=step)

    def close(self) -> None:
        """Finish the trackio run (writes what it buffered)."""
        self.run.finish()
