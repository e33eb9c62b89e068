"""Comparisons and sweeps on a Ray cluster (`--cluster ray`; `sweeps.scheduler` says how this
backend and the local one share the queue).

The driver (`bench compare` / `bench sweep`, on the head node or under `ray job submit`)
connects to the cluster, claims every waiting run of the experiment's queue and submits each as
one Ray task asking for the run's CPUs (`--cpus-per-run`) and GPUs (`scheduler.gpus_asked`;
none on a cluster without GPUs). Ray queues the task until one node has them free and places
it there; Ray's GPU accounting is what keeps two runs off one GPU (each run sees its own as
CUDA_VISIBLE_DEVICES). The task plays and records the run exactly as a local worker does
(`Experiment.play` / `record`: `bench run` and `bench eval` child processes), so run
directories, `status/`, resume, `bench report` and `bench sweep --show` are unchanged. The
experiment directory (`--out`) and its journal must be on a filesystem every node reaches.

Why the project's study drives Ray tasks rather than Ray Tune's `OptunaSearch`: a trial here is
already an Optuna trial, sampled when its task starts, with the Wilcoxon pruner fed per-problem
scores and Hyperband fed the in-training curve through the study's storage; Tune would put its
own trial lifecycle and checkpoint directory between the study and the runs, and its restore
logic beside the queue's exactly-once rule. What Tune adds for multi-GPU trials
(`PlacementGroupFactory`), a task's `num_gpus` on one node already gives a run.

Faults:
* A lost node (or a killed task process): Ray retries the task on another node (`MAX_RETRIES`);
  the run resumes from its last intact checkpoint (`bench run --resume`, which writes the resume
  into the run's events.jsonl). A run directory still locked by the lost process is waited for
  (`BUSY_WAIT_S`) before the claim is dropped as a duplicate.
* A lost driver: Ray ends the tasks it owned (their runs die with them: parent-death signal);
  the next `bench compare` (on any node) finds the holder gone (`holder_gone`: its process,
  checked on its node; a host that is no longer a node of the cluster is gone) and takes the
  runs over, resuming each.
* A task that fails for good (retries spent): the run is failed with the reason; `--retry-failed`
  runs it again.

Logical GPUs: a node that declares GPUs but has no NVIDIA driver (a simulated cluster, tests)
runs its runs on CPU: the task drops Ray's CUDA_VISIBLE_DEVICES so `bench run` does not start
`vllm serve` for GPUs that are only bookkeeping.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps.errors import ExperimentError
from sweeps.launch import listed_gpus
from sweeps.queue import Claim, holder_host, is_dead_here, is_here
from sweeps.scheduler import gpus_asked

INSTALL_HINT = "install it with scripts/install.sh cluster (pip install -e '.[cluster]')"
MAX_RETRIES = 3
"""Ray task retries after a lost node or worker process (each resumes the run)."""
BUSY_WAIT_S = 120.0
"""How long a retried task waits for a lost attempt's process to release the run directory."""
POLL_S = 2.0
"""How often the driver looks for finished tasks, new claims and refreshes the live view."""
PROBE_TIMEOUT_S = 3.0
HOLDER_CHECK_S = 60.0
"""How long the check of a claim's holder on its node may take (a Ray task placed there)."""
NAMESPACE = "bench"
"""The Ray namespace of everything bench starts (its named actors are found there)."""


@dataclass(frozen=True)
class Asks:
    """What one run asks of a node."""

    cpus: float
    gpus: int

    def __str__(self) -> str:
        return f"{self.cpus:g} CPU" + (f", {self.gpus} GPU" if self.gpus else "")


def import_ray() -> Any:
    """The `ray` module, or a one-line ExperimentError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ExperimentError(f"--cluster ray: Ray is not installed; {INSTALL_HINT}") from None
    return ray


def probe(address: str) -> None:
    """A HOST:PORT address that accepts no connection is refused in one line within seconds
    (`ray.init` would retry for about a minute)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # "auto", "local", ray://...: Ray answers these itself, quickly
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise ExperimentError(
            f"--ray-address {address}: no Ray cluster answers there ({exc.strerror or exc}); start one with "
            "`ray start --head` and give the address it prints"
        ) from None


FORWARDED_PREFIXES = ("BENCH_", "HF_", "TRANSFORMERS_", "WANDB_", "MLFLOW_", "TRACKIO_")
"""Environment variables of the driver that its runs on other nodes get too (caches, offline mode,
trackers' keys), with PYTHONPATH (a `--plugin` module's home): a Ray task otherwise has the
environment its node's raylet was started with."""


def forwarded_environment(environ: Any = None) -> dict[str, str]:
    """The driver's variables every task gets (`FORWARDED_PREFIXES`)."""
    environ = os.environ if environ is None else environ
    return {k: v for k, v in environ.items() if k.startswith(FORWARDED_PREFIXES) or k == "PYTHONPATH"}


class RayCluster:
    """A connection to a Ray cluster and the comparisons or sweeps it runs."""

    def __init__(self, ray: Any, address: str) -> None:
        self.ray, self.address = ray, address

    @classmethod
    def connect(cls, address: str = "", log_to_driver: bool = False) -> RayCluster:
        """Connect to the cluster at `address` (else RAY_ADDRESS, else a cluster started on this
        machine with `ray start --head`); a one-line ExperimentError when there is none.
        `log_to_driver`: the tasks' and actors' output is printed here too (a single run's
        learner; a comparison's runs write their own logs)."""
        ray = import_ray()
        address = address or os.environ.get("RAY_ADDRESS") or "auto"
        probe(address)
        if not ray.is_initialized():
            try:
                runtime_env = {"env_vars": forwarded_environment()}
                ray.init(
                    address=address,
                    logging_level="WARNING",
                    log_to_driver=log_to_driver,
                    runtime_env=runtime_env,
                    namespace=NAMESPACE,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                detail = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ExperimentError(
                    f"--cluster ray: no Ray cluster at {address} ({detail}); start one with `ray start --head` "
                    "or give --ray-address HOST:PORT"
                ) from None
        return cls(ray, address)

    # ---- what the cluster has ---------------------------------------------------------------
    def nodes(self) -> list[dict[str, float]]:
        """The CPUs and GPUs of each live node."""
        return [
            {"CPU": n["Resources"].get("CPU", 0.0), "GPU": n["Resources"].get("GPU", 0.0)}
            for n in self.ray.nodes()
            if n.get("Alive")
        ]

    def has_gpus(self) -> bool:
        """Whether any node declares GPUs (without, runs ask for none)."""
        return any(n["GPU"] > 0 for n in self.nodes())

    def asks(self, layers: list[dict[str, Any]], cpus_per_run: float, has_gpus: bool | None = None) -> Asks:
        """What the run of `layers` asks for on this cluster (`has_gpus`: known already, else
        asked of the cluster)."""
        gpus = self.has_gpus() if has_gpus is None else has_gpus
        return Asks(cpus_per_run, gpus_asked(layers) if gpus else 0)

    def check_fits(self, asks: dict[str, Asks]) -> None:
        """Every run (label -> its asks) fits on one live node; else a one-line ExperimentError,
        before anything is queued."""
        nodes = self.nodes()
        for label, ask in asks.items():
            if not any(n["CPU"] >= ask.cpus and n["GPU"] >= ask.gpus for n in nodes):
                most_gpus = max((n["GPU"] for n in nodes), default=0)
                most_cpus = max((n["CPU"] for n in nodes), default=0)
                raise ExperimentError(
                    f"{label} asks one node for {ask}; the largest node of the cluster at {self.address} has "
                    f"{most_gpus:g} GPU and {most_cpus:g} CPU ({len(nodes)} node(s)): lower learner_ranks, "
                    "rollout_servers, rollout_tp or --cpus-per-run, or add a larger node"
                )

    def describe(self) -> str:
        """'3 nodes, 5 CPU, 4 GPU; dashboard http://...' for the driver's first line."""
        nodes = self.nodes()
        cpus, gpus = sum(n["CPU"] for n in nodes), sum(n["GPU"] for n in nodes)
        text = f"ray cluster at {self.address}: {len(nodes)} node(s), {cpus:g} CPU, {gpus:g} GPU"
        try:
            url = self.ray.get_runtime_context().dashboard_url  # "" without the dashboard
        except AttributeError:
            url = ""
        return text + (f"; dashboard http://{url}" if url else "")

    def holder_gone(self, holder: str) -> bool:
        """Whether the holder of a claim (a `sweeps.queue.worker_id`) is gone: on this host its
        process is checked here; on another node of the cluster, by a task placed on that node;
        a host that is no node of the cluster (any more) is gone. A check that cannot be made
        (the probe failed or timed out) keeps the claim: the run directory's lock still guards
        the run, and the next poll asks again."""
        if is_here(holder):
            return is_dead_here(holder)
        host = holder_host(holder)
        nodes = [n for n in self.ray.nodes() if n.get("Alive") and n.get("NodeManagerHostname") == host]
        if not nodes:
            return True
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        on_node = NodeAffinitySchedulingStrategy(nodes[0]["NodeID"], soft=False)
        check = self.ray.remote(is_dead_here).options(num_cpus=0, scheduling_strategy=on_node, max_retries=0)
        try:
            return bool(self.ray.get(check.remote(holder), timeout=HOLDER_CHECK_S))
        except Exception:  # the node died meanwhile, or is too busy to answer: ask again next poll
            return False

    # ---- running an experiment ---------------------------------------------------------------
    def run(self, out: Path, cpus_per_run: float, view: bool = True) -> int:
        """Play every run of the experiment in `out` on the cluster (module docstring); 0 when
        none is left, or 1 when a run failed for good."""
        from sweeps.progress import LiveView
        from sweeps.worker import open_experiment

        out = out.resolve()
        experiment = open_experiment(out, None)
        live = LiveView(out) if view else None
        remote = self.ray.remote(play_on_node)
        gpus = self.has_gpus()  # once: not a query of every node per claimed run
        in_flight: dict[Any, tuple[Any, Claim]] = {}
        for queue in experiment.queues:
            queue.holder_gone = self.holder_gone
        lost = 0
        while True:
            for queue in experiment.queues:
                while (claim := queue.claim()) is not None:
                    ask = self.asks(experiment.run_layers(queue, claim), cpus_per_run, gpus)
                    experiment.mark_queued(queue, claim, str(ask))
                    options = {"num_cpus": ask.cpus, "num_gpus": ask.gpus, "max_retries": MAX_RETRIES}
                    ref = remote.options(**options, name=f"bench-{claim.run}").remote(
                        str(out), os.getcwd(), queue.study.study_name, claim
                    )
                    in_flight[ref] = (queue, claim)
            if not in_flight and all(q.pending() == 0 for q in experiment.queues):
                break
            done = (
                self.ray.wait(list(in_flight), num_returns=len(in_flight), timeout=POLL_S)[0]
                if in_flight
                else []
            )
            if not in_flight:
                time.sleep(POLL_S)  # runs another driver or worker holds: wait, to take over any that dies
            for ref in done:
                queue, claim = in_flight.pop(ref)
                try:
                    self.ray.get(ref)
                except Exception as exc:  # retries spent, or the play itself raised: the run failed
                    lost += 1
                    experiment.fail_unplayed(queue, claim, f"ray task failed: {one_line(exc)}")
            if live is not None:
                live.poll()
        if live is not None:
            live.poll()
        return 1 if lost else 0


def one_line(exc: BaseException) -> str:
    """The last meaningful line of an exception's text (Ray wraps remote tracebacks)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[-1] if lines else type(exc).__name__)[:300]


@contextlib.contextmanager
def _cpu_only_if_logical():
    """Without a real GPU, drop Ray's CUDA_VISIBLE_DEVICES for the run (module docstring)."""
    saved = os.environ.get("CUDA_VISIBLE_DEVICES")
    if saved is not None and not listed_gpus():
        del os.environ["CUDA_VISIBLE_DEVICES"]
    try:
        yield
    finally:
        if saved is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = saved


def play_on_node(out: str, cwd: str, study_name: str, claim: Claim) -> str:
    """The Ray task of one claimed run: play it and record how it ended (module docstring);
    the state it ended in."""
    import ray

    from sweeps.worker import open_experiment

    os.chdir(cwd)  # relative paths in the runs' settings mean what they meant to the driver
    context = ray.get_runtime_context()
    gpus = ray.get_gpu_ids()
    where = f"{socket.gethostname()} node {context.get_node_id()[:8]}"
    where += f" gpu {','.join(map(str, gpus))}" if gpus else ""
    with _cpu_only_if_logical():
        experiment = open_experiment(Path(out), None)
        experiment.where = where
        queue = next(q for q in experiment.queues if q.study.study_name == study_name)
        deadline = time.monotonic() + BUSY_WAIT_S
        result = experiment.play(queue, claim)
        while str(result["state"]) == "busy" and time.monotonic() < deadline:
            time.sleep(5.0)  # a lost attempt's process may still hold the run directory
            result = experiment.play(queue, claim)
        experiment.record(queue, claim, result)
    return str(result["state"])
