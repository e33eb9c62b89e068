"""TensorBoard: event files in RUN_DIR/tensorboard/ (`tensorboard --logdir RUN_DIR`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LOG_SUBDIR = "tensorboard"


class TensorBoardTracker:
    """Scalars per step through torch's SummaryWriter; the config once, as a JSON text summary."""

    def __init__(self, run_dir: Path, config: dict[str, Any]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(run_dir / LOG_SUBDIR))
        text = json.dumps(config, indent=2, default=str)
        self.writer.add_text("config", "    " + text.replace("\n", "\n    "), global_step=0)  # a code block
        self.writer.flush()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's scalars at `step`, flushed so that a live TensorBoard sees them."""
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()
