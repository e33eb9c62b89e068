"""Bringing your own data: a verl parquet, a TRL jsonl and a hub-style `save_to_disk`
directory each train a few steps of the `math` task from one `bench run` command (a fresh
tiny model saved as a local transformers directory: its character tokenizer reads the ASCII
sums of tests/fixtures/byo)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BYO = REPO / "tests" / "fixtures" / "byo"


@pytest.fixture(scope="module")
def chat_tiny(fresh_tiny, tmp_path_factory) -> Path:
    """The same model with a Qwen3-like chat template (`enable_thinking=false` closes an empty
    thought in the generation prompt), as an instruct model's directory has one."""
    from transformers import AutoTokenizer

    from tests.unit.bench.test_chat_thinking import TEMPLATE

    out = tmp_path_factory.mktemp("chat-tiny")
    for path in fresh_tiny.iterdir():
        (out / path.name).write_bytes(path.read_bytes())
    tokenizer = AutoTokenizer.from_pretrained(fresh_tiny)
    tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(out)
    return out


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize("source", ["verl_sums.parquet", "trl_sums.jsonl", "hub_sums"])
def test_a_dataset_trains_a_few_steps_from_one_command(source, fresh_tiny, tmp_path):
    out = tmp_path / "run"
    done = bench(
        "run",
        "--task",
        "math",
        "--set",
        f"task.dataset={BYO / source}",
        "--model",
        str(fresh_tiny),
        "--steps",
        "2",
        "--out",
        str(out),
        "--set",
        "trajectories_per_step=4",
        "--set",
        "max_new_tokens=8",
        "--set",
        "engine_slots=4",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert json.loads((out / "config.json").read_text())["task_args"]["dataset"] == str(BYO / source)
    assert metrics[0]["rollout/thinking_tokens_mean"] == 0  # a model that does not think


@pytest.mark.slow
def test_an_instruct_model_trains_with_a_system_prompt_and_thinking_off(chat_tiny, tmp_path):
    out = tmp_path / "run"
    done = bench(
        "run",
        "--task",
        "math",
        "--set",
        f"task.dataset={BYO / 'verl_sums.parquet'}",
        "--set",
        "task.system_prompt=Be brief.",
        "--set",
        "enable_thinking=false",
        "--model",
        str(chat_tiny),
        "--steps",
        "1",
        "--out",
        str(out),
        "--set",
        "trajectories_per_step=4",
        "--set",
        "max_new_tokens=8",
        "--eval-every",
        "1",
        "--eval-bench",
        "math",  # the dataset's own held-out rows
        "--eval-limit",
        "2",
        "--set",
        "eval_k=1",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    config = json.loads((out / "config.json").read_text())
    assert config["enable_thinking"] is False and config["task_args"]["system_prompt"] == "Be brief."
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert "rollout/thinking_tokens_mean" in next(m for m in metrics if m["step"] == 1)
    # its checkpoints are asked as its rollouts were: in training and by `bench eval RUN_DIR`
    in_training = json.loads((out / "evals" / "step_000001" / "math.summary.json").read_text())
    assert in_training["settings"]["system_prompt"] == "Be brief."
    assert in_training["settings"]["sampling"]["max_new_tokens"] == 8  # the run's length, not math's 2048
    evaluated = bench(
        "eval", "--model", str(out), "--bench", "math", "--limit", "2", "--k", "1",
        "--out", str(tmp_path / "eval"), "--no-progress",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    summary = json.loads((tmp_path / "eval" / "math.summary.json").read_text())
    assert summary["settings"]["system_prompt"] == "Be brief."
    assert summary["settings"]["sampling"]["max_new_tokens"] == 8  # the run's, as in training
    # the same held-out rows in training and after it, none of them trained on
    assert summary["settings"]["data_hash"] == in_training["settings"]["data_hash"]
    from envs.math.tasks import MathTask

    held_out = {p.key for p in MathTask(dataset=str(BYO / "verl_sums.parquet")).held_out}
    keys = {
        json.loads(line)["problem_id"] for line in (tmp_path / "eval" / "math.jsonl").read_text().splitlines()
    }
    assert keys and keys <= held_out


@pytest.mark.slow
def test_a_sweep_on_a_dataset_tunes_on_its_validation_rows(fresh_tiny, tmp_path):
    # task.validation_fraction holds math-val out of training: the sweep's default objective, each
    # trial's final evaluation; the test rows (math) are never a sweep's
    out = tmp_path / "sweep"
    done = bench(
        "sweep", "--algo", "grpo", "--task", "math", "--trials", "2", "--budget", "trajectories=8",
        "--eval-k", "1", "--workers", "1", "--out", str(out),
        "--set", f"task.dataset={BYO / 'trl_sums.jsonl'}", "--set", "task.validation_fraction=0.3",
        "--set", f"model={fresh_tiny}", "--set", "trajectories_per_step=8", "--set", "max_new_tokens=8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((out / "sweep.json").read_text())["objective"] == "eval/math-val/avg_at_k"
    from envs.math.tasks import MathTask

    validation = {
        p.key for p in MathTask(dataset=str(BYO / "trl_sums.jsonl"), validation_fraction=0.3).validation
    }
    for trial in ("trial-000-s0", "trial-001-s0"):
        records = (out / "grpo" / trial / "evals" / "final" / "math-val.jsonl").read_text().splitlines()
        assert {json.loads(line)["problem_id"] for line in records} == validation
