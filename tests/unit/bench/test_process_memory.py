"""`bench.process_memory`: a process's peak resident memory as Linux reports it."""

from __future__ import annotations

import resource
import sys

import pytest

from bench.process_memory import peak_rss_gib


def _resident_gib() -> float:
    line = next(x for x in open("/proc/self/status").read().splitlines() if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_peak_of_this_process_is_getrusage_s_and_covers_what_it_touches():
    assert peak_rss_gib() == pytest.approx(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, rel=0.05
    )
    resident = _resident_gib()
    block = b"\x01" * (256 * 2**20)  # 256 MiB written: every page touched
    assert peak_rss_gib() >= resident + 0.24
    del block


def test_a_process_that_is_not_there_has_no_peak():
    assert peak_rss_gib(2**31 - 1) is None
