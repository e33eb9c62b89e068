"""`bench.process_memory`: a process's peak resident memory as Linux reports it."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from bench.process_memory import peak_rss_gib

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_the_peak_of_this_process_is_getrusage_s():
    assert peak_rss_gib() == pytest.approx(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, rel=0.05
    )


def test_the_peak_of_another_process_covers_what_it_wrote():
    """A fresh child writes 300 MiB and waits: its peak (read by pid, as the engine's is) holds them."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; x = b'1' * (300 * 2**20); print('ready', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        assert 0.29 <= peak_rss_gib(child.pid) < 1.0
    finally:
        child.communicate("")
    assert peak_rss_gib(child.pid) is None  # gone: no figure


def test_a_process_that_is_not_there_has_no_peak():
    assert peak_rss_gib(2**31 - 1) is None
