"""The run entry point below the command line: `bench run`, comparisons, sweeps and tests all
start and resume runs through `start_run` and `resume_run`, then call `bench.train.loop.train`."""

from __future__ import annotations

import time
from pathlib import Path

from bench.config import RunConfig, build_config
from bench.errors import UsageError
from results.rundir import RunDir, write_json_atomic


def default_run_dir(config: RunConfig) -> Path:
    """`runs/<algo>-<task>-s<seed>-<time>`."""
    return Path("runs") / f"{config.algo}-{config.task}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def start_run(config: RunConfig, out: str | Path | None = None, *, progress: bool = True) -> RunDir:
    """Create the run directory of a new run (config.json, env.json) and make the tiny base
    checkpoint if the run needs one and it is not cached yet (once, on the main rank of a
    launch: the other ranks wait and find it). `out` defaults to `default_run_dir(config)`;
    under `accelerate launch` it is required, so that every rank uses the same directory."""
    from bench.provenance import environment_info

    state = process_state()
    if state.num_processes > 1 and out is None:
        raise UsageError("--out is required under accelerate launch (every rank must use the same run dir)")
    out = Path(out) if out is not None else default_run_dir(config)
    if state.is_main_process:
        run = RunDir.create(out, config.to_dict(), environment_info(config.seed))
        print(f"run directory: {run.path}")
        if config.model == "tiny":
            from bench.models.cache import ensure_base_checkpoint

            ensure_base_checkpoint(config.task, config.task_args, progress=progress)
    state.wait_for_everyone()
    return RunDir(out)


def resume_run(path: str | Path, steps: int | None = None) -> tuple[RunDir, RunConfig, Path]:
    """(run, its config, the checkpoint to continue from) of an existing run; `steps` may
    extend it (recorded in config.json)."""
    run = RunDir(path)
    if not (run.path / "config.json").exists():
        raise UsageError(f"--resume {run.path}: not a run directory (no config.json)")
    checkpoint = run.latest_checkpoint()
    if checkpoint is None:
        raise UsageError(f"--resume {run.path}: no completed checkpoint to resume from")
    saved = run.read_config()
    config = build_config(saved, {"steps": steps} if steps else {})
    if config.to_dict() != saved and process_state().is_main_process:
        write_json_atomic(run.path / "config.json", config.to_dict())
    print(f"resuming {run.path} from {checkpoint.name}")
    return run, config, checkpoint


def process_state():
    """accelerate's view of this process (rank, world size); single process when not launched."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())
