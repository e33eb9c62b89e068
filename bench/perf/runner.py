"""`bench perf`'s driver: run the selected sections and assemble the one JSON object."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

from bench.errors import UsageError
from bench.perf import JSON_VERSION, SECTIONS, load_bench_model, machine_info


def _selected(only: str | None) -> list[str]:
    if not only:
        return list(SECTIONS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or not names:
        raise UsageError(
            f"--only: unknown section(s) {', '.join(unknown) or '(none given)'}; valid: {', '.join(SECTIONS)}"
        )
    return [n for n in SECTIONS if n in names]


def run_perf(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected sections; the JSON-ready result."""
    import torch

    if args.repeats < 1:
        raise UsageError(f"--repeats must be >= 1, got {args.repeats}")
    if args.threads < 0:
        raise UsageError(f"--threads must be >= 0, got {args.threads}")
    names = _selected(args.only)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result: dict[str, Any] = {
        "command": "bench perf",
        "json_version": JSON_VERSION,
        "settings": {
            "repeats": args.repeats,
            "quick": bool(args.quick),
            "only": names,
            "threads": args.threads,
        },
        "machine": machine_info(),
    }
    needs_model = {"engine", "learner", "length_buckets", "grpo_vs_trl"} & set(names)
    model = tokenizer = None
    if needs_model:
        model, tokenizer, result["model"] = load_bench_model(args.model)
    sections: dict[str, Any] = {}
    for name in names:
        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON object only
            sections[name] = _run_section(name, model, tokenizer, args)
        sections[name]["section_seconds"] = time.perf_counter() - start
    result["sections"] = sections
    result["machine"]["loadavg_at_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    result["summary"] = {
        name: {"ratio": s["ratio"], "target": s["target"], "reached": s["reached"]}
        for name, s in sections.items()
        if "target" in s
    }
    return result


def _run_section(name: str, model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, Any]:
    if name == "engine":
        from bench.perf.model_sections import engine_section

        return engine_section(model, tokenizer, args.repeats, args.quick)
    if name == "learner":
        from bench.perf.model_sections import learner_section

        return learner_section(model, tokenizer, args.repeats, args.quick)
    if name == "length_buckets":
        from bench.perf.model_sections import length_buckets_section

        return length_buckets_section(model, tokenizer, args.repeats, args.quick)
    if name == "grpo_vs_trl":
        from bench.perf.grpo_vs_trl import grpo_vs_trl_section

        return grpo_vs_trl_section(model, tokenizer, args.repeats, args.quick)
    if name == "async_vs_sync":
        from bench.perf.loop_sections import async_vs_sync_section

        return async_vs_sync_section(args.repeats, args.quick)
    if name == "agent_async_vs_sync":
        from bench.perf.loop_sections import agent_async_vs_sync_section

        return agent_async_vs_sync_section(args.repeats, args.quick)
    if name in ("disagg_async_vs_sync", "weight_transfer"):
        from bench.perf import disagg_sections

        return getattr(disagg_sections, f"{name}_section")(args.repeats, args.quick)
    if name == "kv_cache":
        from bench.perf.kv_cache_section import kv_cache_section

        return kv_cache_section(args.repeats, args.quick)
    from bench.perf.loop_sections import sandbox_section

    return sandbox_section(args.repeats, args.quick)
