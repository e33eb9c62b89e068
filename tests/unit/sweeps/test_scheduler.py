"""The scheduler's two backends (`sweeps.scheduler`, `sweeps.ray_cluster`) without a cluster:
what a run asks for, which backend a command gets, and the one-line refusals that come before
anything is queued (Ray missing, no cluster at an address, a run no node can hold). The runs on a
simulated cluster are tests/integration/test_ray_cluster.py."""

from __future__ import annotations

import dataclasses
import socket
import sys

import pytest

from sweeps.errors import ExperimentError
from sweeps.ray_cluster import Asks, RayCluster, forwarded_environment, import_ray, probe
from sweeps.scheduler import PLACEMENT_DEFAULTS, ClusterBackend, default_backend, gpus_asked, placement_of


def test_placement_defaults_are_the_run_configs():
    from bench.config import RunConfig

    fields = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    assert PLACEMENT_DEFAULTS == {name: fields[name] for name in PLACEMENT_DEFAULTS}


def test_a_run_asks_for_its_learner_ranks_and_its_servers_gpus():
    assert gpus_asked([{"task": "arith"}]) == 1  # one learner, its engine beside it
    layers = [{"learner_ranks": 2}, {"rollout_servers": "2"}, {"rollout_tp": 2, "policy_lr": 1e-5}]
    assert placement_of(layers) == {"learner_ranks": 2, "rollout_servers": 2, "rollout_tp": 2}
    assert gpus_asked(layers) == 2 + 2 * 2
    assert gpus_asked([{"learner_ranks": 4}, {"learner_ranks": 1}]) == 1  # the highest layer wins


def test_ray_address_in_the_environment_means_the_ray_backend():
    assert default_backend({}) is ClusterBackend.LOCAL
    assert default_backend({"RAY_ADDRESS": "10.0.0.1:6379"}) is ClusterBackend.RAY


def test_ray_not_installed_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # an import of it raises ImportError
    with pytest.raises(
        ExperimentError, match=r"Ray is not installed; install it with scripts/install.sh cluster"
    ):
        import_ray()


def test_an_address_where_nothing_listens_is_refused_within_seconds():
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(
        ExperimentError, match=rf"--ray-address 127.0.0.1:{port}: no Ray cluster answers there"
    ):
        probe(f"127.0.0.1:{port}")
    probe("auto")  # Ray answers these itself
    probe("ray://head:10001")


class _FakeRay:
    def __init__(self, nodes):
        self._nodes = nodes

    def nodes(self):
        return self._nodes


def _node(cpus, gpus, alive=True):
    return {"Alive": alive, "Resources": {"CPU": cpus, **({"GPU": gpus} if gpus else {})}}


def test_a_run_no_node_can_hold_is_refused_naming_the_largest_node():
    cluster = RayCluster(_FakeRay([_node(8, 0), _node(4, 2), _node(64, 8, alive=False)]), "head:6379")
    cluster.check_fits({"arm sao": Asks(1, 2), "arm grpo": Asks(4, 0)})
    with pytest.raises(ExperimentError) as refused:
        cluster.check_fits({"arm sao": Asks(1, 2), "arm big": Asks(1, 4)})
    assert str(refused.value).startswith("arm big asks one node for 1 CPU, 4 GPU; the largest node")
    assert "2 GPU and 8 CPU (2 node(s))" in str(refused.value)  # the dead node does not count
    with pytest.raises(ExperimentError, match="arm split asks one node for 6 CPU, 2 GPU"):
        cluster.check_fits({"arm split": Asks(6, 2)})  # CPUs and GPUs must be on the same node


def test_on_a_cluster_without_gpus_runs_ask_for_none():
    layers = [{"learner_ranks": 2}]
    assert RayCluster(_FakeRay([_node(8, 0)]), "a").asks(layers, 2.0) == Asks(2.0, 0)
    assert RayCluster(_FakeRay([_node(8, 4)]), "a").asks(layers, 2.0) == Asks(2.0, 2)


def test_the_runs_get_the_drivers_caches_offline_mode_and_tracker_keys():
    environ = {
        "BENCH_CACHE_DIR": "/c",
        "HF_HUB_OFFLINE": "1",
        "WANDB_API_KEY": "k",
        "PYTHONPATH": "/p",
        "HOME": "/h",
    }
    assert forwarded_environment(environ) == {k: v for k, v in environ.items() if k != "HOME"}
