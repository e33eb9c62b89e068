"""What `--model` means when a checkpoint is evaluated: a run directory, a checkpoint
directory, `tiny` (the embedded model's base checkpoint of the benchmark's task), or a model
directory / hub id; and loading it for evaluation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.errors import UsageError

TINY_TASK_OF_BENCHMARK = {
    "arith": "arith",
    "agent": "agent",
    "swe-mini": "swe",
    "swe-synth": "swe",
    "swe-verified": "swe",
}
"""Which task's tiny base checkpoint `--model tiny` means for an embedded benchmark (else arith)."""


def tiny_task(bench_names: list[str]) -> str:
    """The task whose tiny base checkpoint `--model tiny` loads for these benchmarks."""
    tasks = {TINY_TASK_OF_BENCHMARK.get(name, "arith") for name in bench_names}
    if len(tasks) > 1:
        raise UsageError(
            f"--model tiny means a different base checkpoint for each of {', '.join(bench_names)} "
            f"(tasks {', '.join(sorted(tasks))}); evaluate them one at a time"
        )
    return tasks.pop()


def resolve_model(spec: str, task: str = "arith", progress: bool = True) -> tuple[str, Path | None]:
    """(what to load: a directory or a hub id, the run directory when `spec` is one or one of
    its checkpoints, as `bench compare` evaluates a run's selected checkpoint).

    `tiny` is the embedded model's base checkpoint for `task` (pretrained on first use).
    Raises UsageError for a run directory without a checkpoint, or a checkpoint directory
    without `policy/`.
    """
    if spec == "tiny":
        from bench.models.cache import ensure_base_checkpoint

        return str(ensure_base_checkpoint(task, progress=progress)), None
    path = Path(spec).expanduser()
    if not path.is_dir():
        return spec, None
    if (path / "checkpoints").is_dir():
        from results.rundir import RunDir

        latest, damaged = RunDir(path).latest_intact_checkpoint()
        for bad, why in damaged:
            print(f"bench: checkpoint {bad} is damaged ({why}); evaluating an earlier one")
        if latest is None:
            raise UsageError(
                f"run directory {path} has no intact checkpoint (no checkpoints/step_NNNNNN/ that "
                "matches its manifest)"
            )
        if not (latest / "policy").is_dir():
            raise UsageError(f"checkpoint {latest} has no policy/ directory")
        return str(latest / "policy"), path
    if (path / "policy").is_dir():  # a checkpoint: of a run when it sits in one's checkpoints/
        run = path.parent.parent
        of_run = path.parent.name == "checkpoints" and (run / "config.json").is_file()
        return str(path / "policy"), run if of_run else None
    if path.name.startswith("step_"):
        raise UsageError(f"checkpoint {path} has no policy/ directory")
    return str(path), None


def load_for_eval(source: str, engine: str, progress: bool) -> tuple[Any, Any]:
    """(model, tokenizer); on the GPU for the torch engine when one is present."""
    import torch

    from bench.models.loading import load_model_and_tokenizer

    if not progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    model, tokenizer = load_model_and_tokenizer(source)
    if engine == "torch" and torch.cuda.is_available():
        model = model.to("cuda")
    return model, tokenizer


def _run_config(run_dir: Path | None) -> dict[str, Any]:
    """A run directory's config.json ({} for other models)."""
    config = None if run_dir is None else run_dir / "config.json"
    return json.loads(config.read_text()) if config is not None and config.is_file() else {}


def run_template_options(run_dir: Path | None) -> dict[str, Any]:
    """The chat-template options a run trained with (`enable_thinking` of its config.json), so
    `bench eval --model RUN_DIR` renders prompts as its rollouts did; {} for other models."""
    config = _run_config(run_dir)
    return {"enable_thinking": config.get("enable_thinking")} if config else {}


def run_sampling(run_dir: Path | None) -> dict[str, Any]:
    """The sampling a run's rollouts used (temperature, top_p, and max_new_tokens where it set
    one), so `bench eval --model RUN_DIR` samples its checkpoints as they were trained and as its
    in-training evaluations did; {} for other models (the benchmark's sampling)."""
    config = _run_config(run_dir)
    keys = ("temperature", "top_p", "max_new_tokens")
    return {k: config[k] for k in keys if config.get(k) is not None}


def run_task(run_dir: Path | None) -> tuple[str | None, dict[str, Any]]:
    """(task, task arguments) a run trained (of its config.json); (None, {}) for other models."""
    config = _run_config(run_dir)
    return config.get("task"), dict(config.get("task_args") or {})


def run_system_prompt(run_dir: Path | None) -> str | None:
    """The system prompt a run's rollouts opened with (`task.system_prompt` of its config.json),
    so `bench eval --model RUN_DIR` asks its checkpoints the same way; None for other models."""
    return _run_config(run_dir).get("task_args", {}).get("system_prompt") or None
