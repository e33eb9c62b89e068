"""`bench compare` and `bench sweep` with `--cluster ray` on a simulated cluster (the session's
`ray_cluster`: a head without GPUs and two nodes of 2 logical GPUs): runs asking for 1 and 2
GPUs are placed on nodes that have them and never share a GPU; a node lost mid-run is survived
(the run resumed from its checkpoint on the other node, done exactly once); a sweep with
pruning completes and `--show` reads it; bad input is refused in one line before anything is
queued. These are README's "Past one machine" commands at toy scale."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.test_cli_run import REPO, _env
from tests.integration.test_compare import _args as compare_args
from tests.integration.test_compare import _trials
from tests.integration.test_sweep import _args as sweep_args

pytestmark = pytest.mark.slow


def _on_cluster(cluster, cmd: list[str], *extra: str) -> list[str]:
    return [*cmd, "--cluster", "ray", "--ray-address", cluster.address, "--cpus-per-run", "0.5", *extra]


LOST_RUN_STEPS = 20
"""Steps of the runs that lose their node or driver after their first checkpoint (8 trajectories
each): enough left after the loss that the run is still going when it lands (a step takes 1-3 s
here), few enough that the tests cost tens of seconds, not minutes."""
PLACED_STEPS = 12
"""Steps of the placed runs whose learner actor is killed after the first checkpoint (same why)."""


def _run(cmd: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)


def _statuses(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((out / "status").glob("*.json"))}


def _gpus(where: str) -> tuple[str, list[str]]:
    """'host node 1a2b3c4d gpu 0,1' -> ('1a2b3c4d', ['0', '1'])."""
    words = where.split()
    node = words[words.index("node") + 1]
    return node, (words[words.index("gpu") + 1].split(",") if "gpu" in words else [])


def _until_a_checkpoint(proc: subprocess.Popen, run_dir: Path, output=None) -> None:
    """Wait (300 s at most) for the run's first checkpoint while `proc` lives (its `output`
    stream, if any, quoted when it dies first)."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list((run_dir / "checkpoints").glob("step_*")):
        assert proc.poll() is None, output.read()[-3000:] if output is not None else proc.returncode
        time.sleep(0.5)


def _steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _assert_resumed_once_to(run_dir: Path, last_step: int) -> None:
    """One resume in events.jsonl, from a checkpoint before `last_step` (the loss stopped the
    run's training: a lost attempt whose ranks went on to the end would resume from the last),
    and every step up to `last_step` trained once."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    resumes = [e for e in events if e["event"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["from_step"] < last_step, events
    steps = _steps(run_dir)
    assert steps == sorted(set(steps)) and steps[-1] == last_step, steps  # no step lost or trained twice


def _placed_run_with_a_learner_killed(
    cluster, base: Path, out: Path, placement: list[str], node_rank: int
) -> str:
    """`bench run --cluster ray` of PLACED_STEPS GRPO steps with `placement`; the learner actor of
    `node_rank` killed after the first checkpoint; the placing process's stderr once it ended."""
    import ray

    from bench.ray_placement import NAMESPACE, learner_actor_name
    from tests.integration.test_cli_run import _common

    cmd = [sys.executable, "-m", "bench.cli", "run", "--algo", "grpo", "--steps", str(PLACED_STEPS)]
    cmd += ["--out", str(out)]
    cmd += [*_common(base), *placement]
    cmd += ["--set", "trajectories_per_step=16", "--set", "algo.group_size=4", "--set", "checkpoint_every=1"]
    cmd += ["--cluster", "ray", "--ray-address", cluster.address]
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    _until_a_checkpoint(proc, out, proc.stderr)
    ray.init(address=cluster.address, namespace=NAMESPACE, logging_level="WARNING")
    try:
        ray.kill(ray.get_actor(learner_actor_name(out, node_rank), namespace=NAMESPACE))
    finally:
        ray.shutdown()
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return err


def test_runs_are_placed_by_the_gpus_they_ask_for(ray_cluster, base_checkpoint, tmp_path):
    arms = tmp_path / "arms.toml"
    arms.write_text(
        '[arms.sao]\nalgo = "sao"\n\n'
        '[arms.grpo-disagg]\nalgo = "grpo"\nset = { rollout_servers = 1, engine = "http" }\n'  # learner + a server: 2 GPUs
    )
    out = tmp_path / "cmp"
    cmd = compare_args(base_checkpoint, out, "--no-report", algos=str(arms), seeds="1,2", budget=16)
    done = _run(_on_cluster(ray_cluster, cmd))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ray cluster at" in done.stdout and "3 node(s)" in done.stdout

    statuses = _statuses(out)
    assert sorted(statuses) == ["grpo-disagg-s1", "grpo-disagg-s2", "sao-s1", "sao-s2"]
    spans = []
    for name, status in statuses.items():
        assert status["state"] == "finished", status
        node, gpus = _gpus(status["where"])
        assert len(gpus) == (2 if name.startswith("grpo-disagg") else 1), status["where"]
        spans += [(node, gpu, status["started"], status["ended"], name) for gpu in gpus]
    for a in spans:  # no two runs held one GPU at once
        for b in spans:
            if a[4] < b[4] and a[:2] == b[:2]:
                assert a[3] <= b[2] or b[3] <= a[2], (a, b)
    complete = [t.user_attrs["run"] for t in _trials(out) if t.state.name == "COMPLETE"]
    assert sorted(complete) == sorted(statuses)  # each run done exactly once


def test_the_readme_recipe_ray_job_submit_runs_a_comparison(ray_cluster, base_checkpoint, tmp_path):
    # `ray job submit -- bench compare ...`: the entrypoint runs on the head with RAY_ADDRESS set,
    # which makes --cluster ray the default
    out = tmp_path / "cmp"
    # no report: on the head beside Ray's own processes it takes ~40 s of this test (measured)
    cmd = compare_args(base_checkpoint, out, "--no-report", algos="grpo", seeds="1", budget=16)
    ray_bin = str(Path(sys.executable).with_name("ray"))
    dashboard = f"http://{ray_cluster.head_node.webui_url}"
    done = _run([ray_bin, "job", "submit", "--address", dashboard, "--", *cmd, "--cpus-per-run", "0.5"])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "on the ray cluster" in done.stdout, done.stdout[-3000:]
    status = json.loads((out / "status" / "grpo-s0.json").read_text())
    assert status["state"] == "finished" and "gpu" in status["where"], status


def test_a_lost_node_is_survived_and_the_run_resumed(ray_cluster, base_checkpoint, tmp_path):
    out = tmp_path / "cmp"
    cmd = compare_args(
        base_checkpoint, out, "--no-report", algos="grpo", seeds="1", budget=8 * LOST_RUN_STEPS
    )
    proc = subprocess.Popen(
        _on_cluster(ray_cluster, cmd),
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    run_dir, status_file = out / "runs" / "grpo-s0", out / "status" / "grpo-s0.json"
    _until_a_checkpoint(proc, run_dir, proc.stdout)
    where = json.loads(status_file.read_text())["where"]
    node_prefix, _ = _gpus(where)
    lost = next(n for n in ray_cluster.worker_nodes if n.node_id.startswith(node_prefix))
    ray_cluster.remove_node(lost, allow_graceful=False)
    replacement = ray_cluster.add_node(num_cpus=1, num_gpus=2, object_store_memory=80 * 2**20)
    try:
        output, _ = proc.communicate(timeout=600)
    finally:
        ray_cluster.wait_for_nodes()
    assert proc.returncode == 0, output[-3000:]

    status = json.loads(status_file.read_text())
    assert status["state"] == "finished" and status["attempts"] == 2, status
    assert _gpus(status["where"])[0] != node_prefix  # finished elsewhere
    _assert_resumed_once_to(run_dir, LOST_RUN_STEPS)
    trials = [t for t in _trials(out) if t.user_attrs.get("run") == "grpo-s0"]
    assert [t.state.name for t in trials] == ["COMPLETE"], trials
    assert replacement is not None


def test_a_killed_driver_is_resumed_by_the_same_command(ray_cluster, base_checkpoint, tmp_path):
    # Ray ends the dead driver's tasks (and their runs die with them); the next driver finds the
    # claim's holder gone, takes the run over and resumes it: trained once, nothing lost
    out = tmp_path / "cmp"
    budget = 8 * LOST_RUN_STEPS
    cmd = _on_cluster(
        ray_cluster, compare_args(base_checkpoint, out, "--no-report", algos="grpo", seeds="1", budget=budget)
    )
    driver = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = out / "runs" / "grpo-s0"
    _until_a_checkpoint(driver, run_dir)
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    done = _run(cmd)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    status = json.loads((out / "status" / "grpo-s0.json").read_text())
    assert status["state"] == "finished" and status["attempts"] == 2, status
    steps = _steps(run_dir)
    assert steps == sorted(set(steps)) and steps[-1] == LOST_RUN_STEPS, steps
    trials = [t for t in _trials(out) if t.user_attrs.get("run") == "grpo-s0"]
    assert [t.state.name for t in trials] == ["FAIL", "COMPLETE"], (
        trials
    )  # the dead driver's claim, taken over
    assert trials[0].user_attrs["fail_reason"].startswith("holder gone")


def test_a_claim_held_on_another_host_is_checked_on_that_host_s_node(ray_cluster, monkeypatch):
    # this process plays a driver on another machine than the nodes': a claim's holder, a process
    # of the nodes' host, is checked by a task placed on one of them; a host no node has is gone
    import ray

    import sweeps.ray_cluster
    from sweeps.queue import worker_id
    from sweeps.ray_cluster import NAMESPACE, RayCluster

    code = "from sweeps.queue import worker_id; print(worker_id())"
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    monkeypatch.setattr(sweeps.ray_cluster, "is_here", lambda holder: False)
    ray.init(address=ray_cluster.address, namespace=NAMESPACE, logging_level="WARNING")
    try:
        cluster = RayCluster(ray, ray_cluster.address)
        assert cluster.holder_gone(worker_id()) is False  # this test's process lives on
        assert cluster.holder_gone(gone.stdout.strip()) is True
        assert cluster.holder_gone("not-a-node:b00t:1:1") is True
    finally:
        ray.shutdown()


def _kill(ray, actor) -> None:
    """`ray.kill`, then wait (30 s at most) until the actor answers no call: the kill is
    asynchronous, and a reset that reached the actor before it landed would play the episode on
    it and lose its step (a flaky failure seen once in this module)."""
    ray.kill(actor)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            ray.get(actor.stats.remote(), timeout=5)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError("a killed env worker still answers after 30 s")


def test_an_episode_on_an_env_worker_is_the_episode_played_here(ray_cluster, tmp_path):
    # a Python-tool math episode (sandboxed code, a wrong then a right answer) played on an env
    # worker actor returns what the same episode returns in this process; a killed worker is left
    # out, and with none left the run stops with a one-line reason
    import asyncio

    import ray

    from bench.errors import RunStopped
    from bench.rollout.remote_env import EnvHost, EnvWorkers, RemoteEnvTask
    from envs.math.tasks import MathTask
    from sweeps.ray_cluster import NAMESPACE

    data = tmp_path / "d.csv"
    data.write_text("problem,answer\nWhat is 6*7?,42\nWhat is 2+2?,4\n")
    args = {"data": str(data), "tools": "python", "max_tool_calls": 2}
    task = MathTask(**args)
    problem = next(p for p in task.train + task.held_out if p.answer == "42")
    actions = ["<tool>python\nprint(6*7)\n</tool>", "\\boxed{41}"]

    async def play(env):
        first = await env.reset()
        results = [await env.step(a) for a in actions]
        await env.close()
        return first, env.observation_role, [(r.observation, r.reward, r.done, r.info) for r in results]

    ray.init(address=ray_cluster.address, namespace=NAMESPACE, logging_level="WARNING")
    try:
        host = ray.remote(EnvHost)
        names = ["test-env-a", "test-env-b"]
        actors = [host.options(name=n, namespace=NAMESPACE, num_cpus=0).remote("math", args) for n in names]
        workers = EnvWorkers(ray, names)
        remote_task = RemoteEnvTask(task, workers)
        here = asyncio.run(play(task.make_env(problem)))
        there = asyncio.run(play(remote_task.make_env(problem)))
        assert there == here and "42" in here[2][0][0]
        stats = ray.get([a.stats.remote() for a in actors])
        assert [s["episodes"] for s in stats] == [1, 0] and stats[0]["open"] == 0
        _kill(ray, actors[1])  # the next episode's turn: the lost worker is left out, the other plays it
        assert asyncio.run(play(remote_task.make_env(problem))) == here and workers.lost == {"test-env-b"}
        _kill(ray, actors[0])
        with pytest.raises(RunStopped, match="every env worker is lost"):
            asyncio.run(play(remote_task.make_env(problem)))
    finally:
        ray.shutdown()


def test_a_pruned_sweep_runs_on_the_cluster_and_show_reads_it(ray_cluster, base_checkpoint, tmp_path):
    out = tmp_path / "sweep"
    done = _run(_on_cluster(ray_cluster, sweep_args(base_checkpoint, out)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    states = [json.loads(p.read_text())["state"] for p in sorted((out / "status").glob("*/*.json"))]
    assert len(states) == 4 and set(states) <= {"complete", "pruned"}, states
    assert all("node" in json.loads(p.read_text())["where"] for p in (out / "status").glob("*/*.json"))
    shown = _run([sys.executable, "-m", "bench.cli", "sweep", "--show", str(out)])
    assert shown.returncode == 0 and "trial" in shown.stdout, shown.stderr


def test_bad_cluster_input_is_one_line_before_anything_is_queued(ray_cluster, base_checkpoint, tmp_path):
    cmd = compare_args(base_checkpoint, tmp_path / "none", algos="grpo", seeds="1")
    started = time.monotonic()
    refused = _run([*cmd, "--cluster", "ray", "--ray-address", "127.0.0.1:9"])
    assert refused.returncode == 2 and time.monotonic() - started < 60
    assert refused.stderr.strip().count("\n") == 0 and "no Ray cluster answers there" in refused.stderr

    too_big = _run(
        _on_cluster(
            ray_cluster,
            compare_args(base_checkpoint, tmp_path / "big", algos="grpo", seeds="1"),
            "--set",
            "rollout_servers=2",
            "--set",
            "engine=http",
        )
    )
    assert too_big.returncode == 2, too_big.stderr
    assert "asks one node for 0.5 CPU, 3 GPU" in too_big.stderr and "largest node" in too_big.stderr
    assert not (tmp_path / "big" / "study.journal").exists()

    run = [sys.executable, "-m", "bench.cli", "run", "--algo", "grpo", "--model", str(base_checkpoint)]
    run += ["--out", str(tmp_path / "run"), "--cluster", "ray", "--ray-address", ray_cluster.address]
    too_big = _run([*run, "--engine", "http", "--set", "rollout_servers=1", "--set", "rollout_tp=4"])
    assert too_big.returncode == 2 and "a rollout server asks one node for 1 CPU, 4 GPU" in too_big.stderr
    assert too_big.stderr.strip().count("\n") == 0 and not (tmp_path / "run").exists()
    uneven = _run([*run, "--set", "learner_ranks=4", "--learner-nodes", "3"])
    assert uneven.returncode == 2 and "must split evenly over the nodes" in uneven.stderr
    local = _run([*run[: run.index("--cluster")], "--learner-nodes", "2"])
    assert local.returncode == 2 and "add --cluster ray" in local.stderr


def test_one_run_placed_across_nodes_resumes_after_its_learner_is_killed(
    ray_cluster, base_checkpoint, tmp_path
):
    # two learner ranks (2 GPUs) and one server (1 GPU) cannot share a 2-GPU node: PACK spreads
    # them over both; the env worker (1 CPU) lands where a CPU is left: the head, which has no GPU;
    # the learner actor killed mid-run is replaced by one that resumes the run
    out = tmp_path / "placed"
    placement = ["--engine", "http", "--set", "rollout_servers=1", "--set", "learner_ranks=2"]
    placement += ["--set", "env_workers=1"]
    err = _placed_run_with_a_learner_killed(ray_cluster, base_checkpoint, out, placement, 0)

    placed = [line for line in err.splitlines() if line.startswith("bench: placed on ray:")]
    assert len(placed) == 2, err[-3000:]  # the first learner and the one that resumed
    learner_node = placed[0].split("learner (1 node(s) x 2 rank(s)) on node(s) ")[1].split(";")[0]
    server_node = placed[0].split(" on node ")[1].split(";")[0]
    env_node = placed[0].split("1 env worker(s) on ")[1].split(" node ")[1]
    assert len({learner_node, server_node, env_node}) == 3, placed[0]
    assert "a learner was lost" in err
    _assert_resumed_once_to(out, PLACED_STEPS)
    served = [line for line in err.splitlines() if line.startswith("bench: env workers: ")]
    assert len(served) == 1 and f"node {env_node}: " in served[0], err[-3000:]
    assert int(served[0].rsplit(": ", 1)[1].split()[0]) >= PLACED_STEPS * 16, (
        served
    )  # every step's episodes, both ranks'


def test_learner_ranks_over_two_nodes_form_one_world_and_resume_together(
    ray_cluster, base_checkpoint, tmp_path
):
    # two learner nodes of one rank each (gloo between them); the second node's actor killed
    # mid-run: both start again and the run resumes once
    out = tmp_path / "two-nodes"
    placement = ["--set", "learner_ranks=2", "--learner-nodes", "2"]
    err = _placed_run_with_a_learner_killed(ray_cluster, base_checkpoint, out, placement, 1)

    placed = [line for line in err.splitlines() if line.startswith("bench: placed on ray:")]
    assert len(placed) == 2, err[-3000:]
    nodes = placed[0].split("learner (2 node(s) x 1 rank(s)) on node(s) ")[1].split(",")
    assert len(set(nodes)) == 2, placed[0]  # one rank on each of two nodes
    config = json.loads((out / "config.json").read_text())
    assert config["world_size"] == 2
    _assert_resumed_once_to(out, PLACED_STEPS)
