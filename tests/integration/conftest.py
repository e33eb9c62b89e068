"""Fixtures for integration tests: a small tiny-model base checkpoint, built once per session."""

from __future__ import annotations

import os

import pytest

# Short arith problems keep rollouts (and so these tests) fast.
TASK_ARGS = {"max_operands": 2}
OWN_BENCHMARK = "arith@max_operands=2"
"""The held-out chains of TASK_ARGS: what `bench compare` evaluates when no benchmark is named."""


@pytest.fixture(scope="session", autouse=True)
def isolated_cache(tmp_path_factory):
    """Never write into the user's cache from tests."""
    old = os.environ.get("BENCH_CACHE_DIR")
    os.environ["BENCH_CACHE_DIR"] = str(tmp_path_factory.mktemp("bench-cache"))
    yield
    if old is None:
        os.environ.pop("BENCH_CACHE_DIR", None)
    else:
        os.environ["BENCH_CACHE_DIR"] = old


@pytest.fixture(scope="session")
def base_checkpoint(tmp_path_factory):
    """A briefly pretrained tiny model: good enough to get some rewards, built in ~15 s."""
    from bench.models.pretrain import pretrain

    out = tmp_path_factory.mktemp("base") / "arith"
    pretrain("arith", TASK_ARGS, seed=0, out=out, steps=200, n_examples=4000, progress=False)
    return out


@pytest.fixture(scope="session")
def fresh_tiny(tmp_path_factory):
    """An untrained tiny model and its tokenizer in a local directory (`--model DIR`), for tasks
    without a tiny base checkpoint and for LoRA runs."""
    from bench.models.tiny import new_tiny_model

    out = tmp_path_factory.mktemp("fresh-tiny")
    model, tokenizer = new_tiny_model(0)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def ray_cluster(isolated_cache):
    """One simulated Ray cluster (`ray.cluster_utils.Cluster`) for all the Ray tests: a head
    with 1 CPU, no GPU (where drivers connect; no run lands there) and the dashboard (its job
    server), and two nodes of 1 CPU and 2 logical GPUs each. Started only when a test asks for
    it (~10 s, ~3 GB of memory). Module scope (the Ray tests are one module) stops it after
    them, so its idle processes (~10% of a core together, seen in a CI rehearsal) do not run
    beside the rest of the suite, whose sandbox tests race CPU limits against wall limits."""
    from tests.requires import requires

    requires("ray")
    from ray.cluster_utils import Cluster

    small = {"num_cpus": 1, "object_store_memory": 80 * 2**20}
    from bench.engines.weight_wire import free_port

    # the head serves the dashboard, whose job server `ray job submit` talks to
    head = {**small, "num_gpus": 0, "include_dashboard": True, "dashboard_port": free_port()}
    cluster = Cluster(initialize_head=True, head_node_args=head)
    for _ in range(2):
        cluster.add_node(**small, num_gpus=2)
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()
