"""`bench plan`: the per-GPU memory a run would need, by part, and whether it fits; computed from
the model's shape (`bench.models.memory`), nothing loaded. `--table` prints docs/gpu.md's table."""

from __future__ import annotations

import argparse
import json
import math

from bench.errors import UsageError

PRECISIONS = ("fp32", "bf16-mixed")
TABLE_MODELS = ("qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b")
TABLE_ALGOS = ("grpo", "sao")
TABLE_GPUS = (1, 8)


def register(sub) -> None:
    """Add `bench plan` to the subcommands."""
    p = sub.add_parser(
        "plan",
        help="per-GPU memory of a run by part (weights, grads, optimizer, activations, critic, ...): computed",
        description="Per-GPU memory of a learner (AdamW; FSDP2 full sharding over --learner-gpus) and of a "
        "colocated engine, by part, computed from the model's shape; nothing is loaded. The arithmetic and its "
        "assumptions: bench/models/memory.py; docs/gpu.md marks which numbers a GPU run has measured.",
    )
    p.add_argument(
        "--model",
        default="tiny",
        metavar="SPEC",
        help="tiny, smollm2, a known shape (qwen3-0.6b, qwen3-1.7b, qwen3-4b, qwen3-8b, qwen3-14b, "
        "qwen3-30b-a3b, smollm2-135m) or a local transformers directory (its config.json) (default: tiny)",
    )
    p.add_argument(
        "--algo", default="sao", help="algorithm: a critic and a reference follow from it (default: sao)"
    )
    p.add_argument("--preset", help="named preset of the algorithm (e.g. sao: full-parameter-critic)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="algo.FIELD=VALUE",
        help="an algorithm field, e.g. --set algo.beta=0.04 (a KL term: GRPO then holds a reference model)",
    )
    p.add_argument("--precision", choices=PRECISIONS, default="fp32", help="learner numerics (default: fp32)")
    p.add_argument("--learner-gpus", type=int, default=1, help="GPUs the learner shards over (default: 1)")
    p.add_argument("--activation-checkpointing", action="store_true", help="recompute each layer in backward")
    p.add_argument(
        "--learner-chunk-tokens",
        type=int,
        default=0,
        help="padded tokens per learner forward/backward on each GPU (the run setting learner_chunk_tokens); "
        "0, the default, as a run: from the model's size, ~8 GiB of float32 activations by the learner's rule",
    )
    p.add_argument(
        "--engine-memory-utilization",
        type=float,
        default=0.0,
        metavar="F",
        help="a rollout engine colocated on each learner GPU takes this share of it for weights and KV cache, as "
        "vLLM's gpu_memory_utilization (default: 0, the engine has its own GPUs)",
    )
    p.add_argument("--gpu-memory", type=float, default=80.0, metavar="GIB", help="GiB per GPU (default: 80)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument(
        "--table",
        action="store_true",
        help="print docs/gpu.md's table instead: Qwen3 0.6B-8B x grpo, sao x fp32, bf16-mixed x 1, 8 GPUs "
        "(--learner-chunk-tokens and --gpu-memory apply)",
    )
    p.set_defaults(func=run)


def _check_numbers(args: argparse.Namespace) -> None:
    """Non-positive or non-finite numbers: one UsageError before anything is imported."""
    for flag, value in (("--learner-gpus", args.learner_gpus), ("--gpu-memory", args.gpu_memory)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number, got {value}")
    if args.learner_chunk_tokens < 0:
        raise UsageError(
            f"--learner-chunk-tokens must be >= 0 (0: a run's default), got {args.learner_chunk_tokens}"
        )
    if not (math.isfinite(args.engine_memory_utilization) and 0 <= args.engine_memory_utilization < 1):
        raise UsageError(
            f"--engine-memory-utilization must be in [0, 1), got {args.engine_memory_utilization}"
        )


def _algorithm_memory(algo: str, preset: str | None, sets: list[str]) -> dict:
    """Whether the configured algorithm trains a critic (and freezes its attention) and holds a
    reference model, from the plugin itself (`critic`, `needs`)."""
    from bench.config import RunConfig, make_algorithm
    from bench.config_values import parse_set_options

    layers = parse_set_options(sets)
    extra = sorted(set(layers) - {"algo_args"})
    if extra:
        raise UsageError(f"--set: bench plan takes only algo.FIELD=VALUE, got {', '.join(extra)}")
    algorithm = make_algorithm(
        RunConfig(algo=algo, algo_preset=preset, algo_args=layers.get("algo_args", {}))
    )
    critic = algorithm.critic
    return {
        "critic": critic is not None,
        "critic_frozen_attention": bool(critic is not None and critic.freeze_attention),
        "reference": "ref_logp" in algorithm.needs,
    }


def chunk_tokens(args: argparse.Namespace, shape) -> int:
    """--learner-chunk-tokens, or where it is 0 what a run of this model uses (`learner_chunk_tokens`)."""
    from bench.models.logprobs import chunk_tokens_for

    if args.learner_chunk_tokens:
        return args.learner_chunk_tokens
    return chunk_tokens_for(shape.layers, shape.hidden, shape.intermediate, shape.vocab)


def _setup(args: argparse.Namespace, shape, precision: str, gpus: int, checkpointing: bool, needs: dict):
    from bench.models.memory import GIB, LearnerSetup, Precision

    return LearnerSetup(
        precision=Precision(precision),
        learner_gpus=gpus,
        activation_checkpointing=checkpointing,
        chunk_tokens=chunk_tokens(args, shape),
        engine_memory_utilization=args.engine_memory_utilization,
        gpu_bytes=int(args.gpu_memory * GIB),
        **needs,
    )


def run(args: argparse.Namespace) -> int:
    """Handler of `bench plan`."""
    _check_numbers(args)
    if args.table:
        print(memory_table(args))
        return 0
    from bench.models.shapes import resolve_shape

    shape = resolve_shape(args.model)
    needs = _algorithm_memory(args.algo, args.preset, args.set)
    setup = _setup(args, shape, args.precision, args.learner_gpus, args.activation_checkpointing, needs)
    result = plan_result(args, shape, setup)
    print(json.dumps(result, indent=2) if args.json else format_plan(result))
    return 0


def plan_result(args: argparse.Namespace, shape, setup) -> dict:
    """The JSON object of one plan: the inputs, every part in bytes, the total and whether it fits."""
    import dataclasses

    from bench.models.memory import Part, estimate, total_bytes

    parts = estimate(shape, setup)
    total = total_bytes(parts)
    engine_weights = sum(p.bytes for p in parts if p.part == Part.ENGINE_WEIGHTS)
    engine_fits = engine_weights <= setup.engine_memory_utilization * setup.gpu_bytes or not engine_weights
    return {
        "command": "bench plan",
        "computed": True,  # arithmetic, not a measurement
        "model": args.model,
        "algo": args.algo if args.preset is None else f"{args.algo}:{args.preset}",
        "parameters": shape.parameters(),
        "setup": {k: str(v) if hasattr(v, "value") else v for k, v in dataclasses.asdict(setup).items()},
        "parts": {str(p.part): {"bytes": p.bytes, "how": p.how} for p in parts},
        "total_bytes": total,
        "gpu_bytes": setup.gpu_bytes,
        "fits": total <= setup.gpu_bytes and engine_fits,
        "engine_weights_fit_its_share": engine_fits,
    }


def format_plan(result: dict) -> str:
    """`bench plan` as text: one row per part, the total, and the verdict."""
    from bench.models.memory import GIB
    from results.tables import format_table

    rows = [
        {"part": name, "GiB": f"{p['bytes'] / GIB:.2f}", "how (computed)": p["how"]}
        for name, p in result["parts"].items()
    ]
    rows.append({"part": "total", "GiB": f"{result['total_bytes'] / GIB:.2f}", "how (computed)": "per GPU"})
    gpu = result["gpu_bytes"] / GIB
    verdict = "fits" if result["fits"] else "does NOT fit"
    if not result["engine_weights_fit_its_share"]:
        verdict += " (the engine's weights exceed its --engine-memory-utilization share)"
    setup = result["setup"]
    head = (
        f"bench plan: {result['model']} ({result['parameters']:,} parameters), {result['algo']}, "
        f"{setup['precision']}, {setup['learner_gpus']} learner GPU(s)"
    )
    return f"{head}\n\n{format_table(rows, ['part', 'GiB', 'how (computed)'])}\n\n{verdict} in {gpu:g} GiB per GPU"


def memory_table(args: argparse.Namespace) -> str:
    """docs/gpu.md's table: GiB per GPU (state = weights + grads + optimizer; critic with its
    state), the total without and with activation checkpointing (AC), and whether it fits."""
    from bench.models.memory import GIB, Part, estimate, total_bytes
    from bench.models.shapes import known_shape

    lines = [
        "| model | algo | precision | GPUs | state | critic | tokens/chunk | activations | total | total, AC | fits |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in TABLE_MODELS:
        shape = known_shape(model)
        for algo in TABLE_ALGOS:
            needs = _algorithm_memory(algo, None, [])
            for precision in PRECISIONS:
                for gpus in TABLE_GPUS:
                    plain = estimate(shape, _setup(args, shape, precision, gpus, False, needs))
                    ckpt = estimate(shape, _setup(args, shape, precision, gpus, True, needs))
                    by = {p.part: p.bytes / GIB for p in plain}
                    state = by[Part.WEIGHTS] + by[Part.GRADS] + by[Part.OPTIMIZER]
                    total, total_ac = total_bytes(plain) / GIB, total_bytes(ckpt) / GIB
                    fits = (
                        "yes"
                        if total <= args.gpu_memory
                        else "with AC"
                        if total_ac <= args.gpu_memory
                        else "no"
                    )
                    lines.append(
                        f"| {model} | {algo} | {precision} | {gpus} | {state:.1f} | {by.get(Part.CRITIC, 0):.1f} "
                        f"| {chunk_tokens(args, shape):,} | {by[Part.ACTIVATIONS]:.1f} | {total:.1f} | {total_ac:.1f} "
                        f"| {fits} |"
                    )
    return "\n".join(lines)
