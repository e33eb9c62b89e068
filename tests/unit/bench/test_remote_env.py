"""The learner's side of env workers (`bench.rollout.remote_env`) without a cluster: no env
workers is the task itself; env workers the placer did not name are refused in one line. The
actors themselves run on a simulated Ray cluster in tests/integration/test_ray_cluster.py."""

from __future__ import annotations

import pytest

from bench.errors import UsageError
from bench.rollout.remote_env import ENV_WORKERS_VARIABLE, on_env_workers


def test_no_env_workers_is_the_task_itself():
    task = object()
    assert on_env_workers(task, 0, environ={}) is task


@pytest.mark.parametrize("named", ["", "bench-env-x-0"])
def test_env_workers_not_placed_by_ray_are_refused(named):
    with pytest.raises(UsageError, match="env_workers=2 places the episodes' environments on Ray actors"):
        on_env_workers(object(), 2, environ={ENV_WORKERS_VARIABLE: named})
