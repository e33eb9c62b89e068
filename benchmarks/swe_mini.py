"""`swe-mini`: the embedded SWE set (`envs.swe.mini`, 33 one-bug Python repositories), played
with the SWE scaffold in the local runtime (git working copy, tests in the sandbox) and graded
by SWE-bench's resolved rule, exactly as `--task swe` trains on it. No download, no Docker."""

from __future__ import annotations

from benchmarks.base import BenchmarkSpec, BuiltinSource, SamplingDefaults
from benchmarks.swe_verified import SWE_COLUMNS, swe_episode_task, swe_row


def _rows() -> list[dict]:
    from envs.swe.mini import load_swe_mini

    return [inst.to_record() for inst in load_swe_mini()]


def swe_mini() -> BenchmarkSpec:
    """Every swe-mini instance; resolved = all FAIL_TO_PASS and PASS_TO_PASS tests pass."""
    from envs.swe.task import SweTask

    return BenchmarkSpec(
        name="swe-mini",
        version=1,
        description="swe-mini: embedded one-bug Python repositories in the SWE-bench schema, local runtime",
        source=BuiltinSource(
            recipe="envs.swe.mini.load_swe_mini() (envs/swe/mini/swe_mini.jsonl)", build=_rows
        ),
        license="Apache-2.0 (written for this project)",
        prompt_template="{problem}",
        grader=None,
        sampling=SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=SweTask.max_new_tokens, k=4),
        columns=SWE_COLUMNS,
        parse_row=swe_row,
        episode_task=swe_episode_task("local"),
    )
