"""`grade_gsm8k` on every row of the real GSM8K test split: the full copy (`../shared/data` beside
the clone) where it is present, else the 51-row sample shipped in tests/fixtures/data."""

import json

import pytest

from envs.math.graders import grade_gsm8k, gsm8k_reference


@pytest.fixture(scope="module")
def rows(benchmark_data):
    copy = benchmark_data("gsm8k/test.jsonl")
    with copy.path.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert len(rows) == copy.rows
    return rows


def test_every_reference_parses(rows):
    refs = [gsm8k_reference(row["answer"]) for row in rows]
    assert all(ref.denominator == 1 for ref in refs), "GSM8K references are integers"
    assert any(ref >= 1000 for ref in refs) and any("," in row["answer"].rsplit("####", 1)[1] for row in rows)


def test_stated_answer_is_correct_and_off_by_one_is_wrong(rows):
    wrong_accepted, right_rejected = [], []
    for i, row in enumerate(rows):
        ref = row["answer"].rsplit("####", 1)[1].strip()
        value = gsm8k_reference(row["answer"])
        if not grade_gsm8k(f"Let me think.\n#### {ref}", row["answer"]).correct:
            right_rejected.append((i, ref))
        if not grade_gsm8k(f"The answer is ${value.numerator:,}.", row["answer"]).correct:
            right_rejected.append((i, f"${value.numerator:,}"))
        if grade_gsm8k(f"Let me think.\n#### {value + 1}", row["answer"]).correct:
            wrong_accepted.append((i, ref))
        if grade_gsm8k(f"Let me think.\n#### {value - 1}", row["answer"]).correct:
            wrong_accepted.append((i, ref))
    assert not right_rejected, right_rejected[:10]
    assert not wrong_accepted, wrong_accepted[:10]
