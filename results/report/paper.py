"""The SAO paper's own numbers (Hou et al., arXiv 2607.07508; summarised in the project's
docs/sao.md), shown beside this harness's results in the paper's table layouts, always in a
column labelled as the paper's: they were measured at GLM/Qwen3 scale, not here.

Arm names map to the paper's rows by the harness's conventions (`grpo+dis` is GRPO with the
DIS objective, `ppo:vapo` vanilla VAPO, ...); benchmark names to its columns.
"""

from __future__ import annotations

PAPER_SCALE = "paper, GLM/Qwen3 scale"

BENCHMARK_COLUMNS = {
    "aime25": "AIME2025",
    "beyond-aime": "BeyondAIME",
    "hmmt-nov25": "HMMT Nov25",
    "imo-answerbench": "IMOAnswerBench",
    "swe-verified": "SWE-Bench Verified",
}
"""Harness benchmark -> the paper's column name."""

TABLES: dict[str, dict] = {
    "table1": {
        "title": "Table 1: math with a Python tool (Pass@1, %)",
        "columns": ["AIME2025", "BeyondAIME", "HMMT Nov25", "IMOAnswerBench"],
        "rows": {
            "SFT (w/ python)": ("base", [80.4, 53.3, 75.2, 53.3]),
            "GRPO": ("grpo", [84.2, 54.8, 76.0, 55.8]),
            "GRPO + DIS": ("grpo+dis", [93.5, 70.8, 84.0, 70.0]),
            "SAO w/ DIS only": ("sao:dis-only", [94.2, 71.5, 86.7, 71.3]),
            "SAO": ("sao", [97.3, 74.8, 88.3, 74.0]),
        },
    },
    "table2": {
        "title": "Table 2: SWE-Bench Verified (resolved, %)",
        "columns": ["SWE-Bench Verified"],
        "swe": True,
        "rows": {
            "base": ("base", [23.0]),
            "+GRPO (w/ DIS)": ("grpo+dis", [27.0]),
            "+SAO": ("sao", [29.8]),
        },
    },
    "table3": {
        "title": "Tables 3-4: value-model ablations (Pass@1, %)",
        "columns": ["AIME2025", "BeyondAIME"],
        "rows": {
            "SAO": ("sao", [97.3, 74.8]),
            "single critic update (K=1)": ("sao:single-critic-update", [95.0, 69.8]),
            "full-parameter critic": ("sao:full-parameter-critic", [90.6, 74.5]),
            "vanilla VAPO": ("ppo:vapo", [91.3, 69.0]),
            "running mean": ("running-mean", [79.8, 55.3]),
        },
    },
    "table5": {
        "title": "Table 5: token- vs step-level advantages at 400 steps (Pass@1, %)",
        "columns": ["AIME2025", "BeyondAIME"],
        "rows": {
            "token-level": ("sao", [89.8, 66.8]),
            "step-level average": ("sao:step-average", [85.8, 60.5]),
            "step-level last token": ("sao:step-last", [87.3, 62.8]),
        },
    },
}
"""Each paper table: its title, the paper's columns, rows: paper label -> (arm name in this
harness, the paper's numbers), and `swe` where it is the software-engineering table (the others
are reasoning tables: the harness's other benchmarks stand in for their columns)."""


def is_swe_benchmark(name: str) -> bool:
    """Whether the harness benchmark `name` scores software-engineering episodes: the registry
    names those `swe-*` (swe-mini, swe-synth, swe-verified). Table 2 shows only those, the
    other tables only the rest (a swe-synth score beside AIME2025 compares nothing)."""
    return name.startswith("swe-")
