"""A LoRA run from the command line (`--set lora_rank=N`): its checkpoints hold only what trains
(the policy's adapter in peft's format; adapters, value head and optimizer states in state/),
`--resume` continues from them, and `bench eval --model RUN_DIR` evaluates base + adapter merged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("peft")


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.mark.slow
def test_lora_checkpoints_hold_adapters_resume_and_evaluate(fresh_tiny, tmp_path):
    out = tmp_path / "run"
    common = ["--set", "trajectories_per_step=4", "--set", "max_new_tokens=16", "--set", "engine_slots=4"]
    done = bench(
        "run",
        "--algo",
        "ppo",
        "--task",
        "arith",
        "--model",
        str(fresh_tiny),
        "--steps",
        "2",
        "--out",
        str(out),
        "--set",
        "lora_rank=4",
        "--set",
        "lora_target_modules=q_proj,v_proj",
        "--set",
        "task.max_operands=2",
        *common,
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    checkpoint = out / "checkpoints" / "step_000002"
    policy = {p.name for p in (checkpoint / "policy").iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json"} <= policy
    assert not any(name.startswith("model") for name in policy)  # no full weights
    adapter = json.loads((checkpoint / "policy" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(fresh_tiny) and adapter["r"] == 4
    assert sorted(set(adapter["target_modules"])) == ["q_proj", "v_proj"]
    # what trains and its optimizer state, in torch distributed checkpoint: no frozen base, no reference
    state_bytes = sum(f.stat().st_size for f in (checkpoint / "state").rglob("*") if f.is_file())
    base_bytes = sum(f.stat().st_size for f in Path(fresh_tiny).glob("*.safetensors"))
    assert 0 < state_bytes < base_bytes / 4, (state_bytes, base_bytes)
    assert not (checkpoint / "critic").exists()

    resumed = bench("run", "--resume", str(out), "--steps", "3", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]

    evaluated = bench(
        "eval",
        "--model",
        str(out),
        "--bench",
        "arith",
        "--limit",
        "2",
        "--out",
        str(tmp_path / "ev"),
        "--max-new-tokens",
        "8",
        "--no-progress",
    )
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert (tmp_path / "ev" / "arith.summary.json").is_file()
