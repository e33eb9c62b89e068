"""Make (or refresh) the shipped tiny base checkpoint of a task: pretrain it with the task's
current recipe (or take the cached one), score it on the task's held-out benchmark, and copy it
into bench/models/bases/<task>/ with a manifest (the recipe key, the command, seed, score, date).

    python scripts/ship_base.py arith [agent drift swe]

A test (`tests/unit/bench/test_shipped_bases.py`) fails when a recipe changed and its shipped
base was not regenerated, naming this command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = {"arith": "arith", "drift": "arith", "agent": "agent", "swe": "swe-synth"}
"""The held-out benchmark each shipped base is scored on (avg@4 over its first 200 problems)."""
FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "pretrain.json",
)


def ship(task: str) -> dict:
    """Pretrain (or reuse the cache), evaluate and copy one task's base; its manifest."""
    sys.path.insert(0, str(ROOT))
    from bench.models.cache import SHIPPED_DIR, SHIPPED_MANIFEST, base_checkpoint_path

    source = base_checkpoint_path(task, {}, 0)
    command = [sys.executable, "-m", "bench.cli", "pretrain", "--task", task, "--out", str(source)]
    subprocess.run(command, cwd=ROOT, check=True)  # a no-op when the cache holds it
    with tempfile.TemporaryDirectory() as tmp:
        bench = BENCHMARK[task]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.cli",
                "eval",
                "--model",
                str(source),
                "--bench",
                bench,
                "--k",
                "4",
                "--limit",
                "200",
                "--out",
                tmp,
                "--no-progress",
            ],
            cwd=ROOT,
            check=True,
        )
        summary = json.loads((Path(tmp) / f"{bench}.summary.json").read_text())
    target = SHIPPED_DIR / task
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(source / name, target / name)
    manifest = {
        "task": task,
        "key": source.name,
        "seed": 0,
        "command": f"bench pretrain --task {task}",
        "regenerate": f"python scripts/ship_base.py {task}",
        "pretrain": json.loads((source / "pretrain.json").read_text()),
        "held_out": {
            "benchmark": bench,
            "k": 4,
            "limit": 200,
            "avg_at_k": summary["avg_at_k"],
            "ci95": summary["ci95"],
        },
        "date": time.strftime("%Y-%m-%d"),
    }
    (target / SHIPPED_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tasks", nargs="+", choices=sorted(BENCHMARK))
    for task in p.parse_args().tasks:
        m = ship(task)
        print(
            f"{task}: shipped {m['key']} ({m['held_out']['benchmark']} avg@4 {m['held_out']['avg_at_k']:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
