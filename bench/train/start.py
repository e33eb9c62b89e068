"""The run entry point below the command line: `bench run`, comparisons, sweeps and tests all
start and resume runs through `start_run` and `resume_run`, then call `bench.train.loop.train`
with the same `RunParts` (the config with its algorithm and task, built once per process).

Both hold the run directory's lock (`RunDir.lock`) for the rest of the process, so two
processes never train into one directory. A resume trusts only checkpoints whose files match
the manifest written at save (`results.rundir.verify_checkpoint`); a newer damaged one is set
aside and the run continues from the newest intact one, or from step 0 when there is none.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from bench.config import RECORDED_KEYS, RunConfig, RunParts, build_run
from bench.config_renames import current_names
from bench.errors import UsageError
from bench.launcher import launched_world_size
from bench.train.setup import check_chat_template
from results.budgets import BUDGETS
from results.files import write_json_atomic
from results.rundir import RunDir

EXTENDING_FIELDS = (
    *(row.field for row in BUDGETS),
    "checkpoint_every",
    "keep_checkpoints",
    "eval_every",
    "report_to",
    "learner_ranks",
    "rollout_servers",
    "rollout_urls",
)
"""Settings a resume may change: they extend a run (longer, checkpointed or evaluated more
often) or move it (its learner ranks and inference servers: the global batch stays) without
changing what it is: every budget limit, the cadences and the placement. Any other changed
setting is refused."""


def default_run_dir(config: RunConfig) -> Path:
    """`runs/<algo>-<task>-s<seed>-<time>`."""
    return Path("runs") / f"{config.algo}-{config.task}-s{config.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_out_dir(out: str | Path) -> Path:
    """`out` as a Path, or a one-line UsageError when it cannot become a directory because it or
    a parent is a file (`RunDir.create` refuses a non-empty directory)."""
    out = Path(out)
    for path in (out, *out.parents):
        if path.exists() and not path.is_dir():
            where = "" if path == out else f" ({path} is a file)"
            raise UsageError(f"--out {out}: not a directory{where}; name a new directory")
    return out


def start_run(parts: RunParts, out: str | Path | None = None, *, progress: bool = True) -> RunDir:
    """Create and lock the run directory of a new run (config.json, env.json) and make the tiny
    base checkpoint if the run needs one and it is not cached yet (once, on the main rank of a
    launch: the other ranks wait and find it). `out` defaults to `default_run_dir(config)`;
    under a launcher (torchrun) it is required, so that every rank uses the same directory."""
    from bench.provenance import environment_info
    from bench.train.distributed import current_dist

    config = parts.config
    state = current_dist()
    if state.world_size > 1 and out is None:
        raise UsageError("--out is required under torchrun (every rank must use the same run dir)")
    out = check_out_dir(out if out is not None else default_run_dir(config))
    check_chat_template(config, parts.task)
    from bench.models.lora import check_run as check_lora

    check_lora(config)  # LoRA hook: peft present, target modules match, before the run dir
    if state.is_main:
        run = RunDir.create(out, recorded_config(parts), environment_info(config.seed))
        run.lock()
        print(f"run directory: {run.path}")
        if config.model == "tiny":
            from bench.models.cache import ensure_base_checkpoint

            ensure_base_checkpoint(config.task, config.task_args, progress=progress)
    state.barrier()
    _name_the_run(out)
    return RunDir(out)


def _name_the_run(path: Path) -> None:
    """BENCH_RUN_ID: what this process's SWE containers are named and labelled by."""
    os.environ["BENCH_RUN_ID"] = Path(path).resolve().name


def resume_run(path: str | Path, *overrides: dict[str, Any]) -> tuple[RunDir, RunParts, Path | None]:
    """(run, its parts, the checkpoint to continue from, None: from step 0) of an existing run.

    `overrides` (config layers, as for `build_config`) may change only `EXTENDING_FIELDS`; the
    changes are written to config.json and to the run's events.jsonl. Damaged checkpoints newer
    than the newest intact one are renamed `damaged_step_NNNNNN` and reported."""
    run = RunDir(path)
    if not (run.path / "config.json").exists():
        raise UsageError(f"--resume {run.path}: not a run directory (no config.json)")
    saved = run.read_config()
    load_recorded_plugin(run, saved)
    parts = build_run(saved, *overrides)
    config = parts.config
    saved = current_names(saved, saved.get("algo", config.algo))  # a renamed field is not a change
    # a field the saved config lacks (added to RunConfig since) takes its default: not a change
    changed = {k: (saved[k], v) for k, v in config.to_dict().items() if k in saved and saved[k] != v}
    refused = [k for k in changed if k not in EXTENDING_FIELDS]
    if refused:
        old, new = changed[refused[0]]
        raise UsageError(
            f"--resume {run.path}: {refused[0]} would change from {old!r} to {new!r}; a resumed run keeps the "
            f"settings of its experiment (it may change only {', '.join(EXTENDING_FIELDS)}); start a new run "
            "with --out instead"
        )
    from bench.train.distributed import current_dist

    main = current_dist().is_main
    if main:
        run.lock()
    checkpoint, damaged = run.latest_intact_checkpoint()
    if main:
        for bad, why in damaged:
            print(f"bench: checkpoint {bad.name} is damaged ({why}); continuing from an earlier one")
            _set_aside(bad)
        now = recorded_config(parts)
        _note_changed_algorithm(saved, now)
        ranks = {"world_size": now["world_size"]}  # a resume may run on another number of ranks
        # a config.json from before world_size was recorded is not rewritten for it (the event has it)
        if changed or saved.get("world_size", ranks["world_size"]) != ranks["world_size"]:
            write_json_atomic(run.path / "config.json", {**saved, **config.to_dict(), **ranks})
        event = {"event": "resume", "from_step": _step_of(checkpoint), "changed": changed, **ranks}
        run.append_event(event)
        if checkpoint is None:
            run.truncate_metrics(0)
    _name_the_run(run.path)
    where = checkpoint.name if checkpoint is not None else "step 0 (no intact checkpoint yet)"
    print(f"resuming {run.path} from {where}")
    return run, parts, checkpoint


def load_recorded_plugin(run: RunDir, saved: dict[str, Any]) -> None:
    """Register the plugin a run was trained with (config.json's `algo_source`), so that
    `--resume` needs no `--plugin`; a one-line UsageError when its module cannot be imported now."""
    from algorithms import registry

    source = saved.get("algo_source") or {}
    if (
        saved.get("algo") in registry.names()
        or not source.get("module")
        or source.get("source") == "built-in"
    ):
        return
    try:
        registry.load_plugin_module(source["module"])
    except registry.RegistryError as exc:
        dist = source.get("distribution")
        where = (
            f"install {dist}=={source.get('version')}" if dist else f"put {source['module']} on PYTHONPATH"
        )
        raise UsageError(
            f"--resume {run.path}: its algorithm {saved.get('algo')!r} comes from plugin module "
            f"{source['module']!r}, which cannot be loaded now ({exc}); {where}"
        ) from None


def _note_changed_algorithm(saved: dict[str, Any], now: dict[str, Any]) -> None:
    """Print a note when the algorithm's effective config or its plugin version differs from what
    the run recorded (e.g. a plugin upgraded between start and resume); the run goes on."""
    for key in RECORDED_KEYS:
        before, after = saved.get(key), now.get(key)
        if key == "world_size" or before is None or before == after:
            continue  # another number of ranks is the resume event's `world_size`, not a note
        diff = [
            f"{k}: {before.get(k)!r} -> {after.get(k)!r}"
            for k in sorted({*before, *after})
            if before.get(k) != after.get(k)
        ]
        print(
            f"bench: note: {key} differs from the one recorded at the start of this run ({'; '.join(diff)})"
        )


def _set_aside(checkpoint: Path) -> Path:
    """Rename a damaged checkpoint `damaged_step_NNNNNN[_i]` (kept for inspection, no longer
    listed as a checkpoint, never pruned)."""
    target, i = checkpoint.with_name(f"damaged_{checkpoint.name}"), 1
    while target.exists():
        target, i = checkpoint.with_name(f"damaged_{checkpoint.name}_{i}"), i + 1
    checkpoint.rename(target)
    return target


def _step_of(checkpoint: Path | None) -> int:
    """The step number of a `step_NNNNNN` checkpoint directory (0 for None)."""
    return 0 if checkpoint is None else int(checkpoint.name.rsplit("_", 1)[-1])


def discard_if_never_trained(run: RunDir) -> bool:
    """Remove a run directory that holds no step and no checkpoint (a start that failed before
    training, e.g. on a model that cannot be loaded), so that its `--out` can be used again;
    True when it was removed."""
    import shutil

    evals = run.path / "evals"
    if run.read_metrics() or run.list_checkpoints() or (evals.is_dir() and any(evals.iterdir())):
        return False
    run.unlock()
    shutil.rmtree(run.path, ignore_errors=True)
    return True


def recorded_config(parts: RunParts) -> dict[str, Any]:
    """What config.json holds: the fields, then the algorithm's effective config (every field after
    its preset and overrides) as `algo_config`, and where its code comes from as `algo_source`
    (source, class, module, and for plugins the distribution and its version), so that a resume
    can load the plugin again and a reader sees every setting the run trained with; and the
    number of learner ranks (`world_size`)."""
    from algorithms import registry

    return {
        **parts.config.to_dict(),
        "algo_config": dataclasses.asdict(parts.algorithm.config),
        "algo_source": registry.provenance(parts.config.algo),
        "world_size": launched_world_size(),
    }
