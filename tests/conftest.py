"""Test-wide settings: never touch a model hub, keep CPU threads modest, skip GPU tests on CPU
and Docker tests without a daemon, and give tests the benchmark data: the full copies where
they sit beside the checkout, else the samples shipped with the tests."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402

from tests.benchmark_data import benchmark_copy, copies_in_use  # noqa: E402


@pytest.fixture(scope="session")
def benchmark_data():
    """`benchmark_data("gsm8k/test.jsonl")`: the `DataCopy` of a benchmark file the tests read,
    the full published set where `../shared/data` holds it, else the sample in tests/fixtures/data."""
    return benchmark_copy


def pytest_report_header(config):
    """Which benchmark data the tests read (shown without -q)."""
    return f"benchmark data: {copies_in_use()}"


def pytest_terminal_summary(terminalreporter):
    """The same line at the end of the run, which -q keeps."""
    terminalreporter.write_line(f"benchmark data: {copies_in_use()}")


def _docker_daemon_error() -> str | None:
    """Why `docker`-marked tests cannot run (no SDK, no daemon), or None when a daemon answers."""
    try:
        import docker
    except ImportError:
        return "needs the docker SDK (pip install -e '.[swe]') and a running Docker daemon"
    try:
        docker.from_env(timeout=3).ping()
    except Exception as exc:  # no socket, connection refused, permission denied
        return f"needs a running Docker daemon ({type(exc).__name__})"
    return None


def pytest_collection_modifyitems(config, items):
    """Skip `gpu` tests when no CUDA device is present and `docker` tests when no daemon answers."""
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if docker_items:  # probe the daemon only when such tests were collected
        reason = _docker_daemon_error()
        if reason:
            for item in docker_items:
                item.add_marker(pytest.mark.skip(reason=reason))
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing entirely
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:  # the marker, not the keyword: tests/gpu/ also holds engine tests that run on CPU
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)
