"""Math benchmarks: IMOAnswerBench, BeyondAIME, AIME 2025 and GSM8K, in their official schemas.

Every spec asks for the final answer in `\\boxed{}` and grades with the project's only graders
(`envs.math.graders`). Sampling defaults follow the paper's evaluation (temperature 1.0,
top-p 1.0; `k` = the number of runs it averages: 16, or 4 for BeyondAIME). The paper does not
state a generation budget; `max_new_tokens=32768` is our choice for thinking models.

Sources and pins (bump a spec's `version` whenever its pin, prompt or grader changes):
- imo-answerbench: `imobench/answerbench_v2.csv` of github.com/google-deepmind/superhuman at
  commit `IMOBENCH_COMMIT` (v2 replaced `answerbench.csv` on 2026-02-12 to fix ambiguous
  statements and wrong answers); CC-BY 4.0, attribute Google DeepMind (IMO-Bench).
- beyond-aime: hub `ByteDance-Seed/BeyondAIME`, split `test`, fields `problem`, `answer`.
  UNPINNED (`main`): no commit sha could be verified offline when this spec was written;
  `data_hash` in each eval record identifies the exact content. Pin it and bump the version
  on first online use.
- aime25: hub `math-ai/aime25` (one `test` split, fields `problem`, `answer`, `id`), chosen
  over `opencompass/AIME2025` (two configs, `question`) and `yentinglin/aime_2025` (`train`
  split) because one split with `problem`/`answer` matches the other sets.
- gsm8k: hub `openai/gsm8k`, config `main`, split `test` (`question`, `answer` ending in
  `#### N`); MIT.
"""

from __future__ import annotations

from typing import Any

from benchmarks.base import BenchmarkSpec, FileSource, HubSource, SamplingDefaults
from envs.base import Problem
from envs.math.graders import grade_gsm8k, grade_integer, grade_symbolic

IMOBENCH_COMMIT = "33f605d65914d03496eca6c5a7ee59ced44b869e"
"""Commit of google-deepmind/superhuman whose `imobench/README.md` lists `answerbench_v2.csv`."""

IMOBENCH_URL = f"https://raw.githubusercontent.com/google-deepmind/superhuman/{IMOBENCH_COMMIT}/imobench/answerbench_v2.csv"
"""The official IMO-AnswerBench v2 CSV (source page: github.com/google-deepmind/superhuman/tree/main/imobench)."""

BOXED_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{}."
"""Prompt of the competition-math sets: the problem, then the request for a boxed final answer."""

_MATH_SAMPLING = SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=32768, k=16)


def _text(value: Any) -> str:
    """A cell as a string (parquet/hub rows may carry ints, e.g. integer answers)."""
    return "" if value is None else str(value)


# ----------------------------------------------------------------------------- IMOAnswerBench

IMO_COLUMNS = ("Problem ID", "Problem", "Short Answer", "Category", "Subcategory", "Source")


def _imo_row(index: int, row: dict[str, Any]) -> Problem:
    """`Problem ID` is the key; category, subcategory and source go to meta."""
    return Problem(
        key=_text(row["Problem ID"]),
        prompt=_text(row["Problem"]).strip(),
        answer=_text(row["Short Answer"]),
        meta={"category": row["Category"], "subcategory": row["Subcategory"], "source": row["Source"]},
    )


def imo_answerbench() -> BenchmarkSpec:
    """IMO-AnswerBench v2: 400 olympiad problems with short answers, graded by `grade_symbolic`."""
    return BenchmarkSpec(
        name="imo-answerbench",
        version=1,
        description="IMO-AnswerBench v2 (Google DeepMind IMO-Bench): 400 olympiad short-answer problems",
        source=FileSource(url=IMOBENCH_URL, pin=IMOBENCH_COMMIT),
        license="CC-BY-4.0 (attribute Google DeepMind, IMO-Bench)",
        prompt_template=BOXED_TEMPLATE,
        grader=grade_symbolic,
        sampling=_MATH_SAMPLING,
        columns=IMO_COLUMNS,
        parse_row=_imo_row,
        breakdown="category",
    )


# ----------------------------------------------------------------------------- BeyondAIME


def _beyond_aime_row(index: int, row: dict[str, Any]) -> Problem:
    """Keys are `beyond-aime-<row index>` (the dataset has no id field)."""
    return Problem(
        key=f"beyond-aime-{index}", prompt=_text(row["problem"]).strip(), answer=_text(row["answer"]).strip()
    )


def beyond_aime() -> BenchmarkSpec:
    """BeyondAIME (ByteDance Seed): 100 integer-answer problems, graded by `grade_integer`."""
    return BenchmarkSpec(
        name="beyond-aime",
        version=1,
        description="BeyondAIME (ByteDance Seed): 100 problems harder than AIME, integer answers",
        source=HubSource(dataset_id="ByteDance-Seed/BeyondAIME", revision="main", split="test"),
        license="CC0-1.0 (per the dataset card)",
        prompt_template=BOXED_TEMPLATE,
        grader=grade_integer,
        sampling=SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=32768, k=4),
        columns=("problem", "answer"),
        parse_row=_beyond_aime_row,
    )


# ----------------------------------------------------------------------------- AIME 2025


def _aime25_row(index: int, row: dict[str, Any]) -> Problem:
    """Keys are `aime25-<id>` (`id` is "0".."29"; the row index when a local file lacks it)."""
    ident = _text(row.get("id", index)).strip() or str(index)
    return Problem(
        key=f"aime25-{ident}", prompt=_text(row["problem"]).strip(), answer=_text(row["answer"]).strip()
    )


def aime25() -> BenchmarkSpec:
    """AIME 2025 I and II: 30 integer-answer problems, graded by `grade_integer`."""
    return BenchmarkSpec(
        name="aime25",
        version=1,
        description="AIME 2025 (I and II): 30 problems, integer answers 0-999",
        source=HubSource(
            dataset_id="math-ai/aime25", revision="563bb8404243c5f09de6ec262f2db674fe5bce9b", split="test"
        ),
        license="Apache-2.0 (dataset packaging; problems by the MAA)",
        prompt_template=BOXED_TEMPLATE,
        grader=grade_integer,
        sampling=_MATH_SAMPLING,
        columns=("problem", "answer"),
        parse_row=_aime25_row,
    )


# ----------------------------------------------------------------------------- GSM8K


def _gsm8k_row(index: int, row: dict[str, Any]) -> Problem:
    """Keys are `gsm8k-<row index>`; the answer keeps the full solution (graded after `#### `)."""
    return Problem(
        key=f"gsm8k-{index:04d}", prompt=_text(row["question"]).strip(), answer=_text(row["answer"])
    )


def gsm8k() -> BenchmarkSpec:
    """GSM8K test split: 1319 grade-school word problems, graded by `grade_gsm8k`."""
    return BenchmarkSpec(
        name="gsm8k",
        version=1,
        description="GSM8K test split (OpenAI): 1319 grade-school word problems, numeric answers",
        source=HubSource(
            dataset_id="openai/gsm8k",
            revision="cc7b047b6e5bb11b4f1af84efc572db110a51b3c",
            split="test",
            config="main",
        ),
        license="MIT",
        prompt_template=BOXED_TEMPLATE,
        grader=grade_gsm8k,
        # Not a paper benchmark: a quick sanity set, so one sample and a shorter budget.
        sampling=SamplingDefaults(temperature=1.0, top_p=1.0, max_new_tokens=4096, k=1),
        columns=("question", "answer"),
        parse_row=_gsm8k_row,
    )
