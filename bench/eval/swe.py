"""The SWE end of `bench eval`: the official predictions file, and SWE-bench's own harness.

After the episodes of an SWE benchmark ran (each already graded in its runtime by swebench's
`get_eval_report`), `write_predictions_files` writes what the official harness reads: one JSONL
per sample index with `instance_id`, `model_name_or_path`, `model_patch` (the episode's git
diff). For `swe-verified`, `run_official_harness` then runs `swebench.harness.run_evaluation`
(swebench 5; needs the `swe` extra and a Docker daemon) once per sample index, each with its own
run id, against the instances file the episodes ran on (`<bench>.instances.jsonl`: the pinned
revision's rows, never the hub's latest), under a wall-clock limit, and reads back that run's
report only. Where the harness cannot run it says what is missing, and the files stay for
running it elsewhere (the command is in the summary). `benchmarks.swe_verified.
read_harness_report` grades existing harness output offline.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.swe_verified import read_harness_report, write_instances, write_predictions

HARNESS_TIMEOUT_S = 6 * 3600
"""Default wall-clock limit of one harness run (one sample index), in seconds."""


def write_predictions_files(
    out_dir: Path, benchmark: str, records: list[dict[str, Any]], model: str
) -> list[Path]:
    """`<benchmark>.predictions.jsonl` (k = 1) or `.predictions.s<j>.jsonl` per sample index j."""
    by_sample: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_sample.setdefault(int(r["sample_index"]), []).append(
            {
                "instance_id": r["problem_id"],
                "model_name_or_path": model,
                "model_patch": r.get("extracted") or "",
            }
        )
    paths = []
    for j, preds in sorted(by_sample.items()):
        suffix = "" if len(by_sample) == 1 else f".s{j}"
        paths.append(write_predictions(out_dir / f"{benchmark}.predictions{suffix}.jsonl", preds))
    return paths


def harness_command(predictions: Path, instances: Path, run_id: str, workers: int = 4) -> list[str]:
    """The official harness's command line for a predictions file against an instances file."""
    return [
        sys.executable,
        "-m",
        "swebench.harness.run_evaluation",
        "--dataset_name",
        str(instances.resolve()),
        "--split",
        "test",
        "--predictions_path",
        str(predictions.resolve()),
        "--run_id",
        run_id,
        "--max_workers",
        str(workers),
        "--report_dir",
        ".",
    ]


def _why_not(command: list[str]) -> str | None:
    """What keeps the harness from running here (no swebench 5, no Docker daemon), or None."""
    if importlib.util.find_spec("swebench") is None:
        return "the swebench package is missing: pip install -e '.[swe]'"
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception as exc:  # ImportError, DockerException, connection refused, missing socket
        return f"no Docker daemon: {exc}"
    return None


def _remove_run_containers(run_id: str) -> None:
    """Remove the containers a killed harness run left (`sweb.eval.<instance>.<run_id>`)."""
    try:
        import docker

        for container in docker.from_env(timeout=10).containers.list(
            all=True, filters={"name": run_id}, ignore_removed=True
        ):
            container.remove(force=True)
    except Exception:  # best effort: no daemon, or already gone
        pass


def run_harness_once(command: list[str], out_dir: Path, run_id: str, timeout_s: float) -> dict[str, Any]:
    """One harness run (one sample index) in `out_dir`, killed after `timeout_s`; then its report."""
    try:
        done = subprocess.run(command, cwd=out_dir, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _remove_run_containers(run_id)
        return {
            "status": "failed",
            "reason": f"the harness ran past {timeout_s:g} s and was stopped",
            "run_id": run_id,
            "command": command,
        }
    if done.returncode != 0:
        _remove_run_containers(run_id)
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        return {
            "status": "failed",
            "reason": f"exit code {done.returncode}: {lines[-1] if lines else 'no output'}"[:500],
            "run_id": run_id,
            "command": command,
            "stderr": done.stderr[-2000:],
        }
    report = read_harness_report(out_dir, run_id=run_id)
    return {
        "status": "ran",
        "run_id": run_id,
        "command": command,
        "report": {k: v for k, v in report.items() if k != "instances"},
    }


def run_official_harness(
    predictions: list[Path],
    instances: list[dict[str, Any]],
    out_dir: Path,
    benchmark: str = "swe-verified",
    max_workers: int = 4,
    timeout_s: float = HARNESS_TIMEOUT_S,
) -> dict[str, Any]:
    """Grade every predictions file (one per sample index) with the swebench harness in `out_dir`.

    `instances`: the episodes' official records, written to `<benchmark>.instances.jsonl` for
    the harness to read. Returns {"status": "ran"|"failed"|"not run", "runs": [one result per
    sample index], "resolved_rate": mean over the runs that ran (None when none did), "reason"
    (when not all ran), "commands"}."""
    instances_path = write_instances(out_dir / f"{benchmark}.instances.jsonl", instances)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_ids = [f"bench-{stamp}-s{j}" for j in range(len(predictions))]
    commands = [harness_command(p, instances_path, r, max_workers) for p, r in zip(predictions, run_ids)]
    reason = _why_not(commands[0])
    if reason:
        return {
            "status": "not run",
            "reason": reason,
            "commands": commands,
            "runs": [],
            "resolved_rate": None,
        }
    runs = [run_harness_once(c, out_dir, r, timeout_s) for c, r in zip(commands, run_ids)]
    rates = [r["report"]["resolved_rate"] for r in runs if r["status"] == "ran"]
    failed = [r for r in runs if r["status"] != "ran"]
    summary: dict[str, Any] = {
        "status": "failed" if failed else "ran",
        "runs": runs,
        "commands": commands,
        "resolved_rate": sum(rates) / len(rates) if rates and None not in rates else None,
    }
    if failed:
        summary["reason"] = "; ".join(f"{r['run_id']}: {r['reason']}" for r in failed)
    return summary
