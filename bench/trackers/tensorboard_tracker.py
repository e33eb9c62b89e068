"""TensorBoard: event files laid out by experiment, arm and seed. A comparison's run logs to
`<comparison>/tensorboard/<arm>/s<seed>/` (a sweep's to `<sweep>/tensorboard/<arm>/<trial>-s<seed>/`),
so `tensorboard --logdir <comparison>/tensorboard` shows its runs grouped by arm (and `--logdir`
of the folder holding several comparisons, every one of them); a run on its own logs to
RUN_DIR/tensorboard/ (`tensorboard --logdir RUN_DIR`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from results.experiments import RunPlace, arm_slug

LOG_SUBDIR = "tensorboard"


def log_dir(run_dir: Path, place: RunPlace) -> Path:
    """Where a run's event files go (module docstring)."""
    if place.experiment is None:
        return run_dir / LOG_SUBDIR
    return place.experiment / LOG_SUBDIR / arm_slug(place.arm) / place.member


class TensorBoardTracker:
    """Scalars per step through torch's SummaryWriter; the config once, as a JSON text summary."""

    def __init__(self, run_dir: Path, config: dict[str, Any], place: RunPlace) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir(run_dir, place)))
        text = json.dumps(config, indent=2, default=str)
        self.writer.add_text("config", "    " + text.replace("\n", "\n    "), global_step=0)  # a code block
        self.writer.flush()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's scalars at `step`, flushed so that a live TensorBoard sees them."""
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def summarize(self, step: int, metrics: dict[str, float]) -> None:
        """Numbers about the whole run (its final evaluation, the report's): scalars at its last step."""
        self.log(step, metrics)

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
