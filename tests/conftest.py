"""Test-wide settings: never touch a model hub, keep CPU threads modest, skip the tests whose
system service is missing (markers in tests/requires.py), and give tests the benchmark data:
the full copies where they sit beside the checkout, else the samples shipped with the tests."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

from tests.benchmark_data import benchmark_copy, copies_in_use  # noqa: E402
from tests.requires import SERVICES, service_missing  # noqa: E402


@pytest.fixture(scope="session")
def benchmark_data():
    """`benchmark_data("gsm8k/test.jsonl")`: the `DataCopy` of a benchmark file the tests read,
    the full published set where `../shared/data` holds it, else the sample in tests/fixtures/data."""

    return benchmark_copy


@pytest.fixture(scope="session")
def swe_docker_rows(tmp_path_factory):
    """The rows of the offline SWE-bench instances, their images built (cached by content hash;
    `tests.fixtures.swe_docker`). Only for `docker`-marked tests."""
    from tests.fixtures.swe_docker import fixture_rows

    return fixture_rows(tmp_path_factory.mktemp("swe-docker") / "instances.jsonl")


def pytest_report_header(config):
    """Which benchmark data the tests read (shown without -q)."""
    return f"benchmark data: {copies_in_use()}"


def pytest_terminal_summary(terminalreporter):
    """The same line at the end of the run, which -q keeps."""
    terminalreporter.write_line(f"benchmark data: {copies_in_use()}")


def pytest_collection_modifyitems(config, items):
    """Skip the tests of each service marker (`docker`, `gpu`, `postgres`, `chromium`) with the
    reason and the fix when the service is missing; each service is probed only when one of its
    tests was collected (the Docker ping takes up to 3 s)."""
    for marker in SERVICES:
        marked = [item for item in items if item.get_closest_marker(marker)]
        reason = service_missing(marker) if marked else None
        if reason:
            for item in marked:
                item.add_marker(pytest.mark.skip(reason=reason))
