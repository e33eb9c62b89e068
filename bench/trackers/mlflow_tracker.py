"""MLflow: one MLflow run per run directory (tracking URI $MLFLOW_TRACKING_URI, else MLflow's
default). A comparison's (or sweep's) runs go to one MLflow experiment named after it, each run
named `<arm>-s<seed>` and tagged with its comparison, arm and seed; a run on its own goes to
$MLFLOW_EXPERIMENT_NAME (default "rl-bench"). Its id is kept in RUN_DIR/mlflow_run_id, so a
resumed run, its final evaluation and the report's numbers continue the same MLflow run."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from bench.trackers import flat_config
from results.experiments import RunPlace

RUN_ID_FILE = "mlflow_run_id"
MAX_PARAM_CHARS = 500  # MLflow's smallest limit on a parameter value (older servers)


def mlflow_key(key: str) -> str:
    """A metric or parameter name MLflow accepts (letters, digits, _ - . space : / only)."""
    return re.sub(r"[^\w\-. :/]", "_", key)


class MlflowTracker:
    """The run's config as parameters (flattened), metrics per record, the run ended at close."""

    def __init__(self, run_dir: Path, config: dict[str, Any], place: RunPlace) -> None:
        import mlflow

        self.mlflow = mlflow
        mlflow.set_experiment(place.group or os.environ.get("MLFLOW_EXPERIMENT_NAME", "rl-bench"))
        id_file = run_dir / RUN_ID_FILE
        if id_file.exists():  # a resume: the same MLflow run
            self.run = mlflow.start_run(run_id=id_file.read_text().strip())
        else:
            tags = {"bench.run_dir": str(run_dir.resolve()), "bench.arm": place.arm}
            if place.group:
                tags["bench.experiment"] = place.group
            if place.seed is not None:
                tags["bench.seed"] = str(place.seed)
            self.run = mlflow.start_run(run_name=place.name, tags=tags)
            id_file.write_text(self.run.info.run_id + "\n")
        params = {mlflow_key(k): str(v)[:MAX_PARAM_CHARS] for k, v in flat_config(config).items()}
        mlflow.log_params(params)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """One record's numbers at `step`."""
        self.mlflow.log_metrics({mlflow_key(k): v for k, v in metrics.items()}, step=step)

    def summarize(self, step: int, metrics: dict[str, float]) -> None:
        """Numbers about the whole run (its final evaluation, the report's) at its last step."""
        self.log(step, metrics)

    def close(self) -> None:
        """End the MLflow run."""
        self.mlflow.end_run()
