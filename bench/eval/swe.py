"""The SWE end of `bench eval`: the official predictions file, and SWE-bench's own harness.

After the episodes of an SWE benchmark ran (each already graded in its runtime by SWE-bench's
rule), `write_predictions_files` writes what the official harness reads: one JSONL per sample
index with `instance_id`, `model_name_or_path`, `model_patch` (the episode's git diff).
For `swe-verified`, `run_official_harness` then runs `swebench.harness.run_evaluation` on it
(needs the `swe` extra and a Docker daemon) and reads its report back into the summary; where
that is not possible it says what is missing, and the predictions file stays for running the
harness elsewhere. `benchmarks.swe_verified.read_harness_report` grades existing harness
output offline.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.swe_verified import read_harness_report, write_predictions

HARNESS_DATASET = "SWE-bench/SWE-bench_Verified"


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


def harness_command(predictions: Path, data_path: str | None, run_id: str, workers: int = 4) -> list[str]:
    """The official harness's command line for a predictions file (local data file or the hub set)."""
    return [
        sys.executable, "-m", "swebench.harness.run_evaluation",
        "--dataset_name", str(Path(data_path).resolve()) if data_path else HARNESS_DATASET,
        "--split", "test",
        "--predictions_path", str(predictions.resolve()),
        "--run_id", run_id,
        "--max_workers", str(workers),
    ]  # fmt: skip


def run_official_harness(predictions: Path, data_path: str | None, out_dir: Path) -> dict[str, Any]:
    """Run the swebench harness on `predictions` in `out_dir` and read its report back.

    Returns {"status": "ran", "report": ..., "command": ...} or {"status": "not run",
    "reason": ..., "command": ...} (the command to run it elsewhere)."""
    run_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    command = harness_command(predictions, data_path, run_id)
    if importlib.util.find_spec("swebench") is None:
        return {"status": "not run", "reason": "the swebench package is missing: pip install -e '.[swe]'",
                "command": command}  # fmt: skip
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception as exc:  # ImportError, DockerException, connection refused, missing socket
        return {"status": "not run", "reason": f"no Docker daemon: {exc}", "command": command}
    done = subprocess.run(command, cwd=out_dir, capture_output=True, text=True)
    if done.returncode != 0:
        return {"status": "failed", "reason": done.stderr.strip()[-2000:], "command": command}
    report = read_harness_report(out_dir)
    return {
        "status": "ran",
        "command": command,
        "report": {k: v for k, v in report.items() if k != "instances"},
    }
