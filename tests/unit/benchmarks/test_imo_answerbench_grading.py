"""`grade_symbolic` on every reference answer of the real IMOAnswerBench data.

The full copy (400 rows, `../shared/data` beside the clone) where it is present, else the
39-row sample shipped in tests/fixtures/data (every grading method and fallback reason).
Correct answers must grade correct, perturbed answers wrong, and the number of rows decided by
the string fallback is reported and bounded.
"""

import csv
import re
import warnings
from collections import Counter

import pytest

from envs.math.graders import grade_symbolic, symbolic_fallback_reason
from tests.benchmark_data import Kind

MAX_FALLBACK_ROWS = {Kind.FULL: 40, Kind.SAMPLE: 13}
"""Upper bound on rows graded by the string fallback (32 and 13 with math-verify 0.9)."""


def perturb(answer: str) -> str:
    """A wrong variant: integers + 1; else the last digit changed; else `+1` appended."""
    text = answer.replace("$", "").strip().rstrip(".").strip()
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + 1)
    digits = [m.start() for m in re.finditer(r"\d", text)]
    if digits:
        i = digits[-1]
        return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :]
    return text + "+1"


@pytest.fixture(scope="module")
def copy(benchmark_data):
    return benchmark_data("imobench/answerbench_v2.csv")


@pytest.fixture(scope="module")
def rows(copy):
    with copy.path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == copy.rows
    return rows


def test_imo_answerbench_reference_answers_grade(copy, rows, record_property):
    correct, wrong, methods, failures = 0, 0, Counter(), []
    for row in rows:
        answer = row["Short Answer"]
        good = grade_symbolic(f"... so the answer is \\boxed{{{answer}}}", answer)
        bad = grade_symbolic(f"... so the answer is \\boxed{{{perturb(answer)}}}", answer)
        correct += good.correct
        wrong += not bad.correct
        methods[good.method] += 1
        if not good.correct or bad.correct:
            failures.append((row["Problem ID"], answer, good.correct, bad.correct))
    reasons = Counter(symbolic_fallback_reason(row["Short Answer"]) for row in rows)
    fallback = methods["fallback-normalized-string"]
    summary = (
        f"IMOAnswerBench ({copy.kind} copy): correct {correct}/{len(rows)}, perturbed graded wrong {wrong}/{len(rows)}, "
        f"string-fallback rows {fallback} (reasons {dict(reasons)}), methods {dict(methods)}, "
        f"failures {failures[:10]}"
    )
    print(summary)
    warnings.warn(summary, UserWarning, stacklevel=1)  # shown in pytest's warnings summary without -s
    record_property("imo_answerbench_summary", summary)
    assert correct / len(rows) >= 0.97, summary
    assert wrong / len(rows) >= 0.97, summary
    assert fallback <= MAX_FALLBACK_ROWS[copy.kind], summary
