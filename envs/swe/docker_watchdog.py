"""The watchdog of a process's episode containers: removes them when that process dies, SIGKILL
included, within seconds rather than at the next start or at the end of their lifetime.

    python -m envs.swe.docker_watchdog OWNER

`envs.swe.docker_containers.Containers.start` spawns it once per process that starts
containers, in a session of its own (so signals sent to the run's terminal or process group do
not reach it), with a pipe on stdin whose write end only the owner holds. It waits for the end
of that pipe (the owner exited, however) or for the owner to be gone from the process table
(checked every `POLL_S` seconds: a child forked by the owner may hold the pipe open), then
removes every container labelled `rl-bench.owner=OWNER` and exits.
"""

from __future__ import annotations

import os
import select
import sys

from envs.swe.docker_containers import LABEL, owner_alive

POLL_S = 2.0
"""Seconds between two looks at the owner process."""


def wait_for_owner_end(owner: str, stdin: int = 0, poll_s: float = POLL_S) -> None:
    """Return when `stdin` reaches its end or the process of `owner` is gone."""
    while True:
        ready, _, _ = select.select([stdin], [], [], poll_s)
        if ready and not os.read(stdin, 4096):
            return
        if not owner_alive(owner):
            return


def remove_owned(client, owner: str) -> list[str]:
    """Remove every container labelled as `owner`'s; their names."""
    removed = []
    for container in client.containers.list(
        all=True, filters={"label": f"{LABEL}.owner={owner}"}, ignore_removed=True
    ):
        try:
            container.remove(force=True)
            removed.append(container.name)
        except Exception:  # already gone, or going: Docker's auto-removal raced us
            pass
    return removed


def main(argv: list[str]) -> int:
    """Wait for the owner named by argv[0] to end, then remove its containers."""
    owner = argv[0]
    wait_for_owner_end(owner)
    import docker

    remove_owned(docker.from_env(timeout=60), owner)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
