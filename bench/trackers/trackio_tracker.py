"""trackio: local-first tracking (project $TRACKIO_PROJECT, default "rl-bench"; stored under
$TRACKIO_DIR; `trackio show` opens the dashboard). A comparison's runs are one group (the
comparison's name), each named `<arm>-s<seed>`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from results.experiments import RunPlace


class TrackioTracker:
    """trackio.init with the run's config and group, log per record, finish at the end."""

    def __init__(self, run_dir: Path, config: dict[str, Any], place: RunPlace) -> None:
        import trackio

        self.run = trackio.init(
            project=os.environ.get("TRACKIO_PROJECT", "rl-bench"),
            name=place.name,
            group=place.group,
            config=config,
            resume="allow",
        )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's numbers at `step`."""
        self.run.log(metrics, step=step)

    def summarize(self, step: int, metrics: dict[str, float]) -> None:
        """Numbers about the whole run (its final evaluation, the report's) at its last step."""
        self.run.log(metrics, step=step)

    def close(self) -> None:
        """Finish the trackio run (writes what it buffered)."""
        self.run.finish()
