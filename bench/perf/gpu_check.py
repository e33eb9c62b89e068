"""The learner benchmark of `scripts/gpu_check.sh`, and the check's one JSON object.

    python -m bench.perf.gpu_check --out DIR [--tiny] [--tests-rc N] [--install-rc N] [--no-benchmark]

The benchmark: a randomly initialised Qwen3-0.6B-shaped model (`shapes.hf_config("qwen3-0.6b")`)
trained by the real `Learner` (GRPO's step: one forward and backward, AdamW) in bf16-mixed
(FSDP2 over one GPU) with activation checkpointing, on a synthetic batch of `TOKENS` tokens a
step: sequences of `SEQ_LEN` tokens, one prompt token and the rest response, so the LM head runs
on every token as the FLOPs convention counts it, and in one chunk (`chunk_tokens` = the batch).
`WARMUP` untimed steps, then `STEPS` timed ones. Reported: the median seconds per step,
tokens/s, the peak allocated CUDA memory beside `bench plan`'s computed figure for the same
setup (without its CUDA allowance, which `max_memory_allocated` does not see), the model FLOPs
of a step (`bench.models.flops.train_step_flops`, dense and causal attention: recomputation is
not model work) and the MFU against the GPU's peak dense bf16 (`peak_bf16_flops`, None for a GPU
it does not know). `--tiny` runs the same code on a tiny Qwen3 shape, on the CPU when there is
no GPU (`GPU_CHECK_ALLOW_CPU=1`: a dry run of the plumbing, its numbers mean nothing).

The JSON object gathers the install's and the tests' exit codes, the tests' counts from the
junit XML pytest wrote, the benchmark, the 30-step arith run's record (tests/gpu writes it) and
every problem met; a part that fails is recorded there and the rest still runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

TOKENS, SEQ_LEN, WARMUP, STEPS = 16384, 1024, 3, 8
TINY = {"tokens": 512, "seq_len": 128, "warmup": 1, "steps": 2}
TINY_SHAPE = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=32,
    vocab_size=512,
)


def _batch(n: int, seq_len: int, vocab: int, group: int) -> Any:
    """`n` synthetic trajectories of one prompt token and `seq_len - 1` response tokens."""
    import random

    from bench.rollout.episode import Trajectory
    from bench.train.batch import build_batch

    rng = random.Random(0)
    trajectories = []
    for i in range(n):
        response = [rng.randrange(3, vocab) for _ in range(seq_len - 1)]
        trajectories.append(
            Trajectory(
                f"p{i // group}",
                i // group,
                [1],
                response,
                [1] * len(response),
                [-1.0] * len(response),
                [0] * len(response),
                float(i % 2),
            )
        )
    return build_batch(trajectories, pad_id=0, max_response_tokens=seq_len)


def learner_benchmark(tiny: bool) -> dict[str, Any]:
    """The module docstring's benchmark; a dict of its figures."""
    import torch
    from transformers import AutoModelForCausalLM

    from algorithms import registry
    from bench.models.flops import AttentionCount, mfu, peak_bf16_flops, train_step_flops
    from bench.models.loading import DTYPE_KW
    from bench.models.memory import GIB, LearnerSetup, Part, Precision, estimate
    from bench.models.shapes import decoder_shape, hf_config
    from bench.train.learner import Learner

    sizes = TINY if tiny else {"tokens": TOKENS, "seq_len": SEQ_LEN, "warmup": WARMUP, "steps": STEPS}
    config = hf_config("qwen3-0.6b", **(TINY_SHAPE if tiny else {}))
    n, cuda = sizes["tokens"] // sizes["seq_len"], torch.cuda.is_available()
    torch.manual_seed(0)
    with torch.device("cuda" if cuda else "cpu"):
        model = AutoModelForCausalLM.from_config(config, **{DTYPE_KW: torch.float32})
    grpo = registry.get("grpo")
    learner = Learner(
        grpo(grpo.Config(group_size=min(8, n))),
        model.train(),
        policy_lr=1e-6,
        critic_lr=1e-6,
        chunk_tokens=sizes["tokens"],
        precision="bf16-mixed",
        activation_checkpointing=True,
    )
    batch = _batch(n, sizes["seq_len"], config.vocab_size, min(8, n))
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(sizes["warmup"]):
        learner.train_step(batch)
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    seconds = []
    for _ in range(sizes["steps"]):
        start = time.perf_counter()
        learner.train_step(batch)
        sync()
        seconds.append(time.perf_counter() - start)
    step_s = statistics.median(seconds)
    lengths = [sizes["seq_len"]] * n
    flops = train_step_flops(config, lengths)
    setup = LearnerSetup(
        precision=Precision.BF16_MIXED, activation_checkpointing=True, chunk_tokens=sizes["tokens"]
    )
    plan = {p.part: p.bytes for p in estimate(decoder_shape(config), setup)}
    planned = sum(plan.values()) - plan[Part.CUDA]
    peak = torch.cuda.max_memory_allocated() if cuda else None
    peak_flops = peak_bf16_flops() if cuda else None
    return {
        "model": "qwen3-0.6b shape, random init" + (" (tiny dry-run shape)" if tiny else ""),
        "parameters": sum(p.numel() for p in model.parameters()),
        "setup": {
            "algo": "grpo",
            "precision": "bf16-mixed",
            "activation_checkpointing": True,
            "fsdp2_world": 1,
        },
        "tokens_per_step": sizes["tokens"],
        "sequence_length": sizes["seq_len"],
        "warmup_steps": sizes["warmup"],
        "timed_steps": sizes["steps"],
        "step_s": step_s,
        "step_s_all": seconds,
        "tokens_per_s": sizes["tokens"] / step_s,
        "peak_allocated_gib": None if peak is None else peak / GIB,
        "plan_gib_without_cuda_allowance": planned / GIB,
        "peak_over_plan": None if peak is None else peak / planned,
        "model_tflop_per_step": flops / 1e12,
        "model_tflop_per_step_causal": train_step_flops(config, lengths, attention=AttentionCount.CAUSAL)
        / 1e12,
        "peak_bf16_tflops": None if peak_flops is None else peak_flops / 1e12,
        "mfu": None if peak_flops is None else mfu(flops, step_s, peak_flops),
    }


def junit_counts(junit: Path) -> dict[str, Any]:
    """Passed, failed, errors and skipped tests of a pytest junit XML, and the failed ones' names."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    failed = []
    for suite in suites:
        for key in counts:
            counts[key] += int(suite.get(key, 0))
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(f"{case.get('classname')}::{case.get('name')}")
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return {
        "passed": passed,
        "failed": counts["failures"],
        "errors": counts["errors"],
        "skipped": counts["skipped"],
        "failed_names": failed,
    }


def _part(problems: list[str], name: str, fn) -> Any:
    """`fn()`, or None with the problem recorded (and its traceback on stderr)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - every failure is reported, the check goes on
        traceback.print_exc()
        problems.append(f"{name}: {type(exc).__name__}: {exc}"[:500])
        return None


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (unless --no-benchmark) and print the check's one JSON object."""
    p = argparse.ArgumentParser(prog="python -m bench.perf.gpu_check")
    p.add_argument("--out", required=True, help="the check's directory (logs, tests.xml, arith_run.json)")
    p.add_argument("--tiny", action="store_true", help="a tiny shape: a dry run of the plumbing")
    p.add_argument("--install-rc", type=int, default=None)
    p.add_argument("--tests-rc", type=int, default=None)
    p.add_argument("--started", type=float, default=None, help="the check's start (epoch seconds)")
    p.add_argument("--no-benchmark", action="store_true", help="only gather the other parts' records")
    args = p.parse_args(argv)
    out, problems = Path(args.out), []
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu (dry run)"
    record: dict[str, Any] = {
        "gpu_check": 1,
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    record["install_rc"] = args.install_rc
    if args.install_rc:
        problems.append(f"install: rc {args.install_rc}, see {out / 'install.log'}")
    if args.tests_rc:
        problems.append(f"tests: rc {args.tests_rc}, see {out / 'tests.log'}")
    junit = out / "tests.xml"
    tests = _part(problems, "tests", lambda: junit_counts(junit)) if junit.exists() else None
    if tests is None:
        problems.append(f"tests: no junit XML at {junit}")
    record["tests"] = {"rc": args.tests_rc, **(tests or {})}
    arith = out / "arith_run.json"
    record["arith_run"] = json.loads(arith.read_text()) if arith.exists() else None
    record["learner_benchmark"] = (
        None
        if args.no_benchmark
        else _part(problems, "learner_benchmark", lambda: learner_benchmark(args.tiny))
    )
    if args.started is not None:
        record["wall_s"] = time.time() - args.started
    record["problems"] = problems
    print(json.dumps(record, default=str))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
