"""`grade_symbolic` on all 400 reference answers of the real IMOAnswerBench copy.

The data lives outside the repository (`../shared/data`, beside the clone); the test skips
when it is absent. Correct answers must grade correct, perturbed answers wrong, and the
number of rows decided by the string fallback is reported and bounded.
"""

import csv
import re
import warnings
from collections import Counter

import pytest

from envs.math.graders import grade_symbolic, symbolic_fallback_reason

MAX_FALLBACK_ROWS = 40
"""Upper bound on rows graded by the string fallback (32 with math-verify 0.9)."""


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
def rows(shared_data):
    with shared_data("imobench/answerbench_v2.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 400
    return rows


def test_imo_answerbench_reference_answers_grade(rows, record_property):
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
        f"IMOAnswerBench: correct {correct}/{len(rows)}, perturbed graded wrong {wrong}/{len(rows)}, "
        f"string-fallback rows {fallback} (reasons {dict(reasons)}), methods {dict(methods)}, "
        f"failures {failures[:10]}"
    )
    print(summary)
    warnings.warn(summary, UserWarning, stacklevel=1)  # shown in pytest's warnings summary without -s
    record_property("imo_answerbench_summary", summary)
    assert correct / len(rows) >= 0.97, summary
    assert wrong / len(rows) >= 0.97, summary
    assert fallback <= MAX_FALLBACK_ROWS, summary
