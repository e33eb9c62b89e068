"""The benchmark registry: an explicit table of built-in benchmarks, imported only when asked for.

`BENCHMARKS` maps a name to "module:factory"; `get_benchmark` imports the module and calls
the factory (once; specs are immutable), so `import benchmarks.registry` stays cheap and a
benchmark whose data is unreachable costs nothing until it is loaded.
"""

from __future__ import annotations

import difflib
import functools
import importlib
from typing import Any

from benchmarks.base import BenchmarkSpec

BENCHMARKS: dict[str, str] = {
    "imo-answerbench": "benchmarks.math_sets:imo_answerbench",
    "beyond-aime": "benchmarks.math_sets:beyond_aime",
    "aime25": "benchmarks.math_sets:aime25",
    "gsm8k": "benchmarks.math_sets:gsm8k",
    "swe-verified": "benchmarks.swe_verified:swe_verified",
    "arith": "benchmarks.embedded:arith",
    "agent": "benchmarks.embedded:agent",
    "swe-mini": "benchmarks.swe_mini:swe_mini",
    "swe-synth": "benchmarks.swe_mini:swe_synth",
}
"""Built-in benchmarks: name -> "module:factory" (the factory returns a `BenchmarkSpec`)."""


class UnknownBenchmarkError(ValueError):
    """Raised by `get_benchmark` for a name not in `BENCHMARKS`; the message suggests close names."""


def list_benchmarks() -> list[str]:
    """Registered benchmark names, sorted (imports nothing)."""
    return sorted(BENCHMARKS)


@functools.cache
def _build(name: str) -> BenchmarkSpec:
    """Import the factory registered under `name` and build the spec."""
    module_name, _, factory = BENCHMARKS[name].partition(":")
    spec = getattr(importlib.import_module(module_name), factory)()
    if spec.name != name:
        raise RuntimeError(f"BENCHMARKS[{name!r}] points to {BENCHMARKS[name]} whose name is {spec.name!r}")
    return spec


def get_benchmark(name: str) -> BenchmarkSpec:
    """The spec registered under `name`.

    Raises UnknownBenchmarkError: "unknown benchmark 'x'; did you mean 'y'? available: a, b".
    """
    if name not in BENCHMARKS:
        close = difflib.get_close_matches(name, list(BENCHMARKS), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ";"
        raise UnknownBenchmarkError(
            f"unknown benchmark '{name}'{hint} available: {', '.join(list_benchmarks())}"
        )
    return _build(name)


def describe_benchmarks() -> list[dict[str, Any]]:
    """What a `bench benchmarks` listing shows: name, version, description, source, license, sampling."""
    return [
        {
            "name": spec.name,
            "version": spec.version,
            "description": spec.description,
            "source": spec.source.describe(),
            "license": spec.license,
            "sampling": spec.sampling.as_dict(),
        }
        for spec in map(get_benchmark, list_benchmarks())
    ]
