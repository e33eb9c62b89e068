"""The Ray backend's overhead on one machine: the same small comparison (2 arms x 1 seed, one
budget) with the local backend (`--workers 2`) and on a one-node Ray cluster started here
(`ray start --head`, 2 CPUs, `--cpus-per-run 1`), alternated, `--repeats` times each after one untimed warm-up comparison; prints
JSON with the median wall time of each and their ratio (ray / local). The cluster's start and
stop are timed apart (a user starts it once).

    python scripts/cluster_overhead.py [--repeats 3] [--budget 64]

Needs the cluster extra (scripts/install.sh cluster). Runs in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _compare(out: Path, budget: int, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "bench.cli", "compare", "--algos", "sao,grpo", "--seeds", "1"]
    cmd += ["--budget", f"trajectories={budget}", "--eval-limit", "20", "--eval-k", "1", "--no-report"]
    cmd += ["--set", "task.max_operands=2", "--out", str(out), *extra]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"cluster_overhead: {' '.join(cmd)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3, help="comparisons per backend (default 3)")
    p.add_argument("--budget", type=int, default=64, help="trajectories per run (default 64)")
    args = p.parse_args()
    ray_bin = str(Path(sys.executable).with_name("ray"))
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        started = subprocess.run(
            [ray_bin, "start", "--head", "--num-cpus", "2", "--num-gpus", "0", "--disable-usage-stats"],
            capture_output=True,
            text=True,
        )
        if started.returncode != 0:
            sys.exit(f"cluster_overhead: ray start failed: {started.stderr[-2000:]}")
        cluster_start_s = time.perf_counter() - start
        env_address = "auto"
        try:  # untimed first: builds the task's base checkpoint into the cache, warms file caches
            _compare(Path(tmp) / "warm-up", args.budget, ["--workers", "2"])
            for i in range(args.repeats):
                walls["local"].append(_compare(Path(tmp) / f"local-{i}", args.budget, ["--workers", "2"]))
                ray_args = ["--cluster", "ray", "--ray-address", env_address, "--cpus-per-run", "1"]
                walls["ray"].append(_compare(Path(tmp) / f"ray-{i}", args.budget, ray_args))
        finally:
            stop = time.perf_counter()
            subprocess.run([ray_bin, "stop", "--force"], capture_output=True)
            cluster_stop_s = time.perf_counter() - stop
    local, ray = statistics.median(walls["local"]), statistics.median(walls["ray"])
    result = {
        "comparison": f"sao,grpo x 1 seed, trajectories={args.budget}, eval 20 problems x k=1",
        "repeats": args.repeats,
        "local_wall_s": [round(w, 1) for w in walls["local"]],
        "ray_wall_s": [round(w, 1) for w in walls["ray"]],
        "local_median_s": round(local, 1),
        "ray_median_s": round(ray, 1),
        "ratio_ray_over_local": round(ray / local, 3),
        "ray_start_s": round(cluster_start_s, 1),
        "ray_stop_s": round(cluster_stop_s, 1),
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
