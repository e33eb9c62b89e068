"""The benchmark a run or comparison is evaluated on when none is named."""

from benchmarks.registry import task_benchmark_name


def test_a_task_with_a_benchmark_of_its_name_gets_it():
    assert task_benchmark_name("arith") == "arith"
    assert task_benchmark_name("agent", {"tool_latency_s": 0.3}) == "agent"


def test_the_swe_task_is_evaluated_on_its_dataset():
    assert task_benchmark_name("swe") == "swe-mini"
    assert task_benchmark_name("swe", {"dataset": "swe-synth"}) == "swe-synth"
    assert task_benchmark_name("swe", {"dataset": "swe-verified"}) == "swe-verified"


def test_a_task_without_a_benchmark_gets_none_and_math_gets_its_own_rows():
    assert task_benchmark_name("drift") is None
    assert task_benchmark_name("math") == "math"  # its held-out rows (benchmarks.own_data)
