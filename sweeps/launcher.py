"""Comparisons and sweeps never run inside a distributed launcher, and never hand one's variables
to their runs.

Started by `torchrun` or `accelerate launch`, `bench compare` would be N comparisons at once
whose runs inherit WORLD_SIZE and RANK and wait forever at a rendezvous that never completes,
while their workers stay alive holding them. A comparison starts its runs itself, each an ordinary `bench
run` process; the run that wants several learner ranks starts them (`bench run` under torchrun
today, from its own config with the launch-placement work of the GPU issue).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sweeps.errors import ExperimentError

LAUNCHER_VARIABLES = (
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
"""What torchrun's elastic agent (also under `accelerate launch`) sets in each process it starts,
besides the TORCHELASTIC_* variables."""
DETECTED = ("WORLD_SIZE", "RANK", "LOCAL_RANK")
"""The variables whose presence means: this process is a launcher's rank."""


def launcher_variables(environ: Mapping[str, str]) -> list[str]:
    """The launcher variables set in `environ`, in a stable order."""
    elastic = sorted(k for k in environ if k.startswith("TORCHELASTIC_"))
    return [k for k in LAUNCHER_VARIABLES if k in environ] + elastic


def without_launcher_variables(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without any launcher variable: the environment of a run or worker process."""
    drop = set(launcher_variables(environ))
    return {k: v for k, v in environ.items() if k not in drop}


def refuse_inside_launcher(command: str, environ: Mapping[str, str] | None = None) -> None:
    """An ExperimentError (one line, exit 2) when this process is a distributed launcher's rank."""
    environ = os.environ if environ is None else environ
    found = [k for k in launcher_variables(environ) if k in DETECTED or k.startswith("TORCHELASTIC_")]
    if found:
        raise ExperimentError(
            f"bench {command} runs inside a distributed launcher ({', '.join(found)} set): it starts its runs "
            f"itself, so start it as a plain command (`bench {command} ...`, not under torchrun or accelerate "
            "launch)"
        )
