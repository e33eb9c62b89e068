"""The Docker runtime on a real daemon (issue 40), against the offline SWE-bench instances of
`envs.swe.docker_fixtures`: images cached by content, gold patches resolve and empty ones do not,
the attacks of `tests.fixtures.swe_docker` earn nothing here while the official harness pays
three of them, episode containers are isolated and limited, and every fault (a container that
dies, an image missing offline, a process killed with SIGKILL) leaves nothing running."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from tests.requires import requires

requires("swebench", minversion="5")
pytestmark = pytest.mark.docker

from envs.base import EnvFaultWarning  # noqa: E402
from envs.swe.docker_containers import LABEL, owner_label  # noqa: E402
from envs.swe.docker_runtime import DockerRuntime  # noqa: E402
from envs.swe.scaffold import SweEnv  # noqa: E402
from tests.fixtures.swe_docker import attacks, by_id  # noqa: E402


def docker_client():
    import docker

    return docker.from_env(timeout=60)


def containers_of(label: str, value: str) -> list:
    """Containers (running or not) whose `label` is `value`."""
    return docker_client().containers.list(
        all=True, filters={"label": f"{label}={value}"}, ignore_removed=True
    )


def wait_until_gone(label: str, value: str, seconds: float = 30) -> list:
    """Containers labelled so still there after up to `seconds` (polled)."""
    deadline = time.monotonic() + seconds
    while (left := containers_of(label, value)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_a_rebuild_builds_nothing(swe_docker_rows):
    from envs.swe.docker_fixtures import build_images, select

    assert [b.built for b in build_images(select())] == [False] * 6  # the base and five instances


def test_gold_patches_resolve_and_empty_ones_do_not(swe_docker_rows):
    rt = DockerRuntime()

    async def grades(inst):
        return await rt.grade(inst, inst.patch), await rt.grade(inst, "")

    for inst in by_id(swe_docker_rows).values():
        gold, empty = asyncio.run(grades(inst))
        assert gold.resolved and not gold.tamper and "sealed tests not run" not in gold.log, gold.log
        assert not empty.resolved and empty.tests_status["FAIL_TO_PASS"]["failure"] == list(inst.fail_to_pass)


def official_harness(rows: Path, patches: dict[str, str], out: Path) -> dict:
    """The official harness's report on one prediction per instance (`bench.eval.swe`)."""
    from bench.eval.swe import run_official_harness, write_predictions_files

    records = [{"problem_id": i, "sample_index": 0, "extracted": p} for i, p in patches.items()]
    predictions = write_predictions_files(out, "swe-verified", records, "rl-bench/attacks")
    row_list = [json.loads(line) for line in rows.read_text().splitlines()]
    result = run_official_harness(predictions, row_list, out, max_workers=4, timeout_s=600)
    assert result["status"] == "ran", result
    return result["runs"][0]["report"]


def test_the_official_harness_runs_offline_on_the_local_images(swe_docker_rows, tmp_path):
    instances = by_id(swe_docker_rows)
    report = official_harness(swe_docker_rows, {i: inst.patch for i, inst in instances.items()}, tmp_path)
    assert report["resolved_ids"] == sorted(instances) and not report["error_ids"]
    assert not docker_client().containers.list(all=True, filters={"name": "sweb.eval."}, ignore_removed=True)


def test_attacks_earn_nothing_here_and_the_official_harness_pays_three(swe_docker_rows, tmp_path):
    """Where the harness's log parser believes the code under test (the threat model says it may),
    the Docker runtime's grading differs: it resets hook files and asks the sealed tests."""
    instances, cases = by_id(swe_docker_rows), attacks()
    rt = DockerRuntime()
    ours = {i: asyncio.run(rt.grade(instances[i], patch)) for i, (_, patch) in cases.items()}
    assert not any(g.resolved for g in ours.values()), {i: g.log[-300:] for i, g in ours.items()}
    assert ours["swe-mini__clamp-1"].reset == ["conftest.py"]
    for forged in ("swe-mini__find-1", "swe-mini__roman-1"):  # the log parser said resolved
        assert "the log parser and the sealed tests disagree" in ours[forged].tamper
    report = official_harness(swe_docker_rows, {i: p for i, (_, p) in cases.items()}, tmp_path)
    assert report["resolved_ids"] == ["swe-mini__clamp-1", "swe-mini__find-1", "swe-mini__roman-1"]
    assert report["unresolved_ids"] == ["swe-mini__account-1"]
    assert report["empty_patch_ids"] == ["swe-mini__overlap-1"]


def test_episode_containers_have_no_network_and_the_stated_limits(swe_docker_rows):
    inst = by_id(swe_docker_rows)["swe-mini__account-1"]
    rt = DockerRuntime()

    async def go():
        ws = await rt.open(inst)
        try:
            net = await ws.exec(
                "python3", "-c", "import socket; socket.create_connection(('1.1.1.1', 53), 3)"
            )
            links = await ws.exec("ls", "/sys/class/net")
            ws.container.reload()
            return net, links, ws.container.attrs["HostConfig"], ws.container.labels
        finally:
            await ws.close()

    net, links, host, labels = asyncio.run(go())
    assert net.returncode != 0 and "Network is unreachable" in net.output
    assert links.output.split() == ["lo"]
    assert host["NetworkMode"] == "none" and host["NanoCpus"] == 2_000_000_000
    assert host["Memory"] == host["MemorySwap"] == 8 * 1024**3 and host["PidsLimit"] == 1024
    assert labels[f"{LABEL}.owner"] == owner_label() and labels[f"{LABEL}.instance"] == inst.instance_id


def test_a_container_that_dies_mid_episode_ends_it_with_reward_0(swe_docker_rows):
    inst = by_id(swe_docker_rows)["swe-mini__account-1"]
    env = SweEnv(inst, DockerRuntime())

    async def go():
        await env.reset()
        env.workspace.container.kill()  # what an OOM kill or a daemon restart does
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = await env.step("<tool>view account.py</tool>")
        await env.close()
        return step, caught

    step, caught = asyncio.run(go())
    assert step.done and step.reward == 0.0 and step.info["env_error"].startswith("view: swe-mini__account-1")
    assert [str(w.message) for w in caught if w.category is EnvFaultWarning][0].startswith(
        "swe-mini__account-1: the episode's container"
    )
    assert wait_until_gone(f"{LABEL}.owner", owner_label(), 10) == []


def test_an_image_missing_offline_scores_the_episode_0_and_says_why(swe_docker_rows):
    inst = by_id(swe_docker_rows)["swe-mini__account-1"]
    missing = replace(inst, image="swebench/sweb.eval.x86_64.nowhere_1776_none-1:latest")
    env = SweEnv(missing, DockerRuntime())

    async def go():
        messages = await env.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = await env.step("<tool>view account.py</tool>")
        await env.close()
        return messages, step, caught

    messages, step, caught = asyncio.run(go())
    assert "Issue:" in messages[-1]["content"] and step.done and step.reward == 0.0
    why = "swe-mini__account-1: image swebench/sweb.eval.x86_64.nowhere_1776_none-1:latest is not on this machine"
    assert (
        step.info["env_error"].startswith(f"open: {why}") and "could not be pulled" in step.info["env_error"]
    )
    assert [str(w.message) for w in caught if w.category is EnvFaultWarning][0].startswith(why)
    assert "\n" not in step.info["env_error"]


OPENER = """
import asyncio, sys, time
from envs.swe.docker_runtime import DockerRuntime
from envs.swe.task import load_instances_file

async def main():
    rt = DockerRuntime()
    inst = load_instances_file(sys.argv[1])[0]
    await rt.open(inst)
    await rt.open(inst)
    print("open", flush=True)
    time.sleep(600)

asyncio.run(main())
"""


def test_the_containers_of_a_process_killed_with_sigkill_are_removed(swe_docker_rows):
    env = {**os.environ, "BENCH_RUN_ID": f"sigkill-{os.getpid()}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", OPENER, str(swe_docker_rows)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout.readline().strip() == "open"
        assert len(containers_of(f"{LABEL}.run", env["BENCH_RUN_ID"])) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_until_gone(f"{LABEL}.run", env["BENCH_RUN_ID"]) == []  # the watchdog's work
