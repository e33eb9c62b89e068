"""The Docker runtime's containers, with the Docker client mocked: no network, CPU/memory/pid
limits, labels and names by run, removal on close, at exit and of dead owners' leftovers."""

import asyncio
import subprocess
import sys
import types
from unittest import mock

import pytest

from envs.swe import docker_containers
from envs.swe.docker_containers import ContainerLimits, Containers, owner_alive, owner_label, remove_live
from envs.swe.docker_runtime import DockerRuntime
from tests.fixtures.swe_demo import demo_instance

IMAGE = "swebench/sweb.eval.x86_64.demo_1776_calc-1:latest"


def fake_harness():
    harness = mock.Mock()
    harness.unsupported.return_value = None
    harness.spec.return_value = types.SimpleNamespace(image=IMAGE)
    harness.image.side_effect = lambda spec: spec.image
    return harness


def test_episode_container_arguments(monkeypatch):
    monkeypatch.setenv("BENCH_RUN_ID", "runs/sao seed 1")
    client = mock.MagicMock()
    client.containers.list.return_value = []
    limits = ContainerLimits(cpus=1.5, memory="4g", pids=256, lifetime_s=600)
    rt = DockerRuntime(client=client, harness=fake_harness(), limits=limits)

    async def go():
        ws = await rt.open(demo_instance(""))
        await ws.close()
        await ws.close()

    asyncio.run(go())
    (call,) = client.containers.run.call_args_list
    kwargs = call.kwargs
    name = kwargs.pop("name")
    labels = kwargs.pop("labels")
    assert kwargs == {
        "image": IMAGE,
        "command": ["sleep", "600"],  # bounded life, then Docker removes it (auto_remove)
        "detach": True,
        "auto_remove": True,
        "working_dir": "/testbed",
        "network_mode": "none",
        "environment": {"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        "nano_cpus": 1_500_000_000,
        "mem_limit": "4g",
        "memswap_limit": "4g",  # no swap beyond the memory limit
        "pids_limit": 256,
    }
    assert labels == {
        "rl-bench.run": "runs-sao-seed-1",
        "rl-bench.owner": owner_label(),
        "rl-bench.instance": "demo__calc-1",
    }
    assert name.startswith("rl-bench.runs-sao-seed-1.demo__calc-1.") and len(name.rsplit(".", 1)[1]) == 8
    container = client.containers.run.return_value
    container.remove.assert_called_once_with(force=True)  # close removes it, once
    # ignore_removed (issue 40): a container auto-removed between the listing and its inspection
    # (Docker's own SDK inspects each) must not fail the start
    client.containers.list.assert_called_once_with(
        all=True, filters={"label": "rl-bench.owner"}, ignore_removed=True
    )


def test_the_run_label_is_read_when_a_container_starts(monkeypatch):
    """issue 40: the runner names the run (BENCH_RUN_ID) after it built the task and its runtime."""
    monkeypatch.delenv("BENCH_RUN_ID", raising=False)
    containers = Containers()
    monkeypatch.setenv("BENCH_RUN_ID", "sao-swe-1")
    kwargs = containers.run_kwargs(IMAGE, "a__b-1", "/testbed")
    assert kwargs["labels"]["rl-bench.run"] == "sao-swe-1" and kwargs["name"].startswith(
        "rl-bench.sao-swe-1."
    )


def test_network_can_be_given_back():
    kwargs = Containers(ContainerLimits(network=True), run="r").run_kwargs(IMAGE, "a__b-1", "/testbed")
    assert "network_mode" not in kwargs and "environment" not in kwargs
    assert kwargs["labels"]["rl-bench.run"] == "r"


def test_containers_left_open_are_removed_at_exit():
    client = mock.MagicMock()
    client.containers.list.return_value = []
    first, second = mock.Mock(), mock.Mock()
    client.containers.run.side_effect = [first, second]
    with (
        mock.patch.object(docker_containers.atexit, "register") as register,
        mock.patch.object(docker_containers, "_HOOKED", []),
    ):
        containers = Containers(run="r")
        containers.start(client, IMAGE, "a__b-1", "/testbed")
        containers.start(client, IMAGE, "a__b-2", "/testbed")
    register.assert_called_once_with(remove_live)  # the exit hook, registered once
    docker_containers.remove(first)  # closed by its workspace
    first.remove.reset_mock()
    remove_live()  # what the hook runs at exit
    first.remove.assert_not_called()
    second.remove.assert_called_once_with(force=True)


def test_leftovers_of_dead_owners_are_reaped_once():
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead_owner = owner_label(int(dead.stdout))  # start time unreadable now: pid alone decides
    assert not owner_alive(dead_owner) and owner_alive(owner_label())
    assert owner_alive("other-host:1:1")  # another machine's process: never touched

    def container(name, owner):
        made = mock.Mock(labels={"rl-bench.owner": owner})
        made.name = name
        return made

    stale, mine, remote = (
        container("stale", dead_owner),
        container("mine", owner_label()),
        container("remote", "other-host:1:1"),
    )
    client = mock.MagicMock()
    client.containers.list.return_value = [stale, mine, remote]
    containers = Containers(run="r")
    assert containers.reap(client) == ["stale"]
    stale.remove.assert_called_once_with(force=True)
    mine.remove.assert_not_called()
    remote.remove.assert_not_called()
    assert containers.reap(client) == []  # once per client
    containers.start(client, IMAGE, "a__b-1", "/testbed")
    assert client.containers.list.call_count == 1


@pytest.mark.parametrize("status", [404, 409])
def test_removing_a_container_that_is_gone_is_quiet(status):
    class APIError(Exception):
        status_code = status

    gone = mock.Mock()
    gone.remove.side_effect = APIError("gone")
    docker_containers.remove(gone)
    broken = mock.Mock()
    broken.remove.side_effect = RuntimeError("daemon exploded")
    with pytest.raises(RuntimeError):
        docker_containers.remove(broken)
