"""Peak memory of the run's processes, for the per-step `memory/*` metrics.

Linux reports each process's peak resident set (`VmHWM` in /proc/PID/status, the same figure as
`getrusage`'s `ru_maxrss` for the process itself). Pages shared between processes, such as the
weights the learner shares with a `ProcessEngine` child, count in each one's figure, so the
learner's and the engine's peaks are stated apart and never added up.
"""

from __future__ import annotations

from pathlib import Path

_KIB_PER_GIB = 1024 * 1024


def peak_rss_gib(pid: int | str = "self") -> float | None:
    """The peak resident set size of process `pid` (default: this one) in GiB, or None where
    /proc does not say (another OS, a process that is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / _KIB_PER_GIB  # reported in kB (KiB)
    return None
