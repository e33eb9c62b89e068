"""Test-wide settings: never touch a model hub, keep CPU threads modest, skip GPU tests on CPU
and Docker tests without a daemon."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""Real benchmark data (IMOAnswerBench, GSM8K) kept beside the checkout, not in it."""


@pytest.fixture(scope="session")
def shared_data():
    """`shared_data("gsm8k/test.jsonl")`: the path of a file of the shared benchmark data; the
    test is skipped, with the reason, where the data is not present."""

    def path(relative: str) -> Path:
        found = SHARED_DATA / relative
        if not found.is_file():
            pytest.skip(f"shared benchmark data not present: {found} (../shared/data beside the checkout)")
        return found

    return path


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
