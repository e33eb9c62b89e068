"""Experiment trackers: `bench run --report-to tensorboard,wandb,trackio,mlflow`.

Each tracker is a small adapter over the stream of records that metrics.jsonl receives (one per
step, and the step-0 evaluation): metrics.jsonl stays the source of truth, and a tracker only
mirrors it. An adapter is a class in its own module here with four methods: `__init__(run_dir,
config, place)` starts (or resumes) the tracker's run and logs the run's config (config.json:
every field, the algorithm's effective config and its source), `log(step, metrics)` logs one
record's numbers (evaluation scores included, as `eval/<benchmark>/...`), `summarize(step,
metrics)` numbers about the whole run, `close()` ends it.

Runs are grouped as their experiment is (`results.experiments.run_place`): a comparison's runs
are one group (W&B group, MLflow experiment, trackio group, a TensorBoard directory) named after
the comparison, with the arm as W&B job type and `<arm>-s<seed>` as the run's name. After the
run, its final evaluation (`bench eval` into the run's evals/) and the report's headline numbers
(`bench report`, `bench compare`) reach the same tracker runs (`bench.trackers.final`).

A tracker's package comes from the extra of the same name (`pip install 'rl-bench[wandb]'`) and is
imported only when the tracker is chosen; `check_report_to` answers an unknown name or a missing
package with one line before anything is trained. A tracker that fails while logging is dropped
with a warning: training, and metrics.jsonl, go on.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from pathlib import Path
from typing import Any

from bench.config_values import did_you_mean
from bench.errors import UsageError

TRACKERS: dict[str, tuple[str, str]] = {
    "tensorboard": ("bench.trackers.tensorboard_tracker:TensorBoardTracker", "tensorboard"),
    "wandb": ("bench.trackers.wandb_tracker:WandbTracker", "wandb"),
    "trackio": ("bench.trackers.trackio_tracker:TrackioTracker", "trackio"),
    "mlflow": ("bench.trackers.mlflow_tracker:MlflowTracker", "mlflow"),
}
"""name -> (adapter "module:Class", the package it imports; the extra has the tracker's name)."""


def parse_report_to(text: str) -> list[str]:
    """The tracker names of a `--report-to` value ("tensorboard,wandb"; "" or "none": none), in
    order and without repeats; a UsageError with a did-you-mean for an unknown name."""
    names: list[str] = []
    for name in (part.strip().lower() for part in (text or "").split(",")):
        if not name or name == "none" or name in names:
            continue
        if name not in TRACKERS:
            raise UsageError(
                f"report_to: unknown tracker {name!r}{did_you_mean(name, TRACKERS)}; valid: {', '.join(TRACKERS)}"
            )
        names.append(name)
    return names


def check_report_to(text: str) -> None:
    """Every tracker of `text` is known and its package installed (found, not imported), else a
    one-line UsageError naming the extra that installs it."""
    for name in parse_report_to(text):
        package = TRACKERS[name][1]
        if importlib.util.find_spec(package) is None:
            raise UsageError(
                f"--report-to {name}: the {package} package is not installed; install it with "
                f"pip install 'rl-bench[{name}]' (or scripts/install.sh {name})"
            )


def numeric_metrics(record: dict[str, Any]) -> tuple[int, dict[str, float]]:
    """(step, the record's finite numbers but the step): what every tracker logs of a record."""
    metrics = {}
    for key, value in record.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            metrics[key] = float(value)
    return int(record.get("step", 0)), metrics


class Trackers:
    """The chosen trackers of one run, fed the records that metrics.jsonl gets (`log`)."""

    def __init__(self, adapters: dict[str, Any]) -> None:
        self.adapters = adapters

    def log(self, record: dict[str, Any]) -> None:
        """Send one metrics record to every tracker; one that fails is dropped with a warning."""
        if not self.adapters:
            return
        step, metrics = numeric_metrics(record)
        for name, adapter in list(self.adapters.items()):
            try:
                adapter.log(step, metrics)
            except Exception as exc:  # noqa: BLE001 - a tracker must never stop training
                print(
                    f"bench: warning: tracker {name} failed ({type(exc).__name__}: {exc}); it gets no more "
                    "metrics (metrics.jsonl is unaffected)",
                    file=sys.stderr,
                )
                del self.adapters[name]

    def summarize(self, step: int, metrics: dict[str, float]) -> None:
        """Numbers about the whole run to every tracker (a failing one is dropped with a warning)."""
        for name, adapter in list(self.adapters.items()):
            try:
                adapter.summarize(step, metrics)
            except Exception as exc:  # noqa: BLE001 - a tracker must never stop the caller
                print(f"bench: warning: tracker {name} failed ({type(exc).__name__}: {exc})", file=sys.stderr)
                del self.adapters[name]

    def close(self) -> None:
        """End every tracker's run (flushing what it buffered)."""
        for name, adapter in self.adapters.items():
            try:
                adapter.close()
            except Exception as exc:  # noqa: BLE001
                print(f"bench: warning: tracker {name} did not close cleanly ({exc})", file=sys.stderr)
        self.adapters = {}


def open_trackers(
    report_to: str, run_dir: str | Path, config: dict[str, Any], enabled: bool = True
) -> Trackers:
    """Start the trackers named in `report_to` for the run in `run_dir`, each logging `config`
    once and placing the run in its experiment's group (`results.experiments.run_place`); none
    when not `enabled` (e.g. on the ranks of a launch that do not write the run dir). A tracker
    that cannot start is a one-line UsageError naming it."""
    from results.experiments import run_place

    adapters: dict[str, Any] = {}
    names = parse_report_to(report_to) if enabled else []
    place = run_place(Path(run_dir), config) if names else None
    for name in names:
        module, _, cls = TRACKERS[name][0].partition(":")
        try:
            adapters[name] = getattr(importlib.import_module(module), cls)(Path(run_dir), config, place)
        except ImportError as exc:
            Trackers(adapters).close()
            raise UsageError(
                f"--report-to {name}: cannot import its package ({exc}); install it with "
                f"pip install 'rl-bench[{name}]'"
            ) from None
        except Exception as exc:  # noqa: BLE001 - e.g. not logged in, a bad tracking URI
            Trackers(adapters).close()
            raise UsageError(
                f"--report-to {name}: the tracker could not start: {type(exc).__name__}: {exc}"
            ) from None
    return Trackers(adapters)


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"algo_config": {"dis_eps_high": 5.0}}` -> `{"algo_config/dis_eps_high": 5.0}` (for trackers whose
    parameters are flat, e.g. MLflow)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat_config(value, f"{prefix}{key}/"))
        else:
            out[f"{prefix}{key}"] = value
    return out
