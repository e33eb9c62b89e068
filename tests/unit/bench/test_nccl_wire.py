"""The learner side of vLLM's NCCL weight transfer (`bench.engines.nccl_wire`) and the `vllm
serve` command placement starts: the glue run against stand-ins of vLLM's classes (vLLM cannot
run on these CPUs), and every class, field, route and flag used checked against vLLM's source
(skipped where the source is not here)."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass, field

import torch

from bench.engines import nccl_wire
from bench.engines.server_procs import vllm_serve_command

CALLS: list[tuple] = []


def _fake_vllm(monkeypatch, workers: int | None = 2) -> None:
    """Stand-ins for the three vLLM modules `NCCLTransfer` imports, behaving as vLLM 0.34's do
    for what it uses: `send_weights` starts, iterates the source's full tensors, and finishes
    without a version (vLLM's own)."""
    base = types.ModuleType("vllm.distributed.weight_transfer.base")

    @dataclass
    class ParamMeta:
        name: str
        dtype: torch.dtype
        shape: tuple

    class WeightSource:
        pass

    base.ParamMeta, base.WeightSource = ParamMeta, WeightSource
    clients = types.ModuleType("vllm.distributed.weight_transfer.clients")

    class HTTPVLLMWeightSyncClient:
        def __init__(self, base_url, timeout=300):
            self.base_url = base_url

        def start_weight_update(self):
            CALLS.append(("start",))

        def finish_weight_update(self, weight_version=None):
            CALLS.append(("finish", weight_version))

    clients.HTTPVLLMWeightSyncClient = HTTPVLLMWeightSyncClient
    nccl = types.ModuleType("vllm.distributed.weight_transfer.nccl_engine")

    @dataclass
    class NCCLTrainerInitInfo:
        master_address: str
        master_port: int
        world_size: int
        packed: bool = True
        rank: int = field(default=0, kw_only=True)

    class NCCLTrainerWeightTransferEngine:
        @classmethod
        def trainer_init(cls, init_info, *, client, source=None):
            engine = cls()
            engine.info, engine.client, engine.source = init_info, client, source
            CALLS.append(("init", init_info.world_size, [m.name for m in source.metadata]))
            return engine

        def send_weights(self):
            self.client.start_weight_update()
            CALLS.append(("sent", [(name, float(t.sum())) for name, t in self.source.iter_full()]))
            self.client.finish_weight_update()

        def shutdown(self):
            CALLS.append(("shutdown",))

    nccl.NCCLTrainerInitInfo, nccl.NCCLTrainerWeightTransferEngine = (
        NCCLTrainerInitInfo,
        NCCLTrainerWeightTransferEngine,
    )
    for name, module in [
        ("vllm", types.ModuleType("vllm")),
        ("vllm.distributed", types.ModuleType("vllm.distributed")),
        ("vllm.distributed.weight_transfer", types.ModuleType("vllm.distributed.weight_transfer")),
        (base.__name__, base),
        (clients.__name__, clients),
        (nccl.__name__, nccl),
    ]:
        monkeypatch.setitem(sys.modules, name, module)
    if workers is not None:  # else the server is asked (`/get_world_size`)
        monkeypatch.setattr(nccl_wire, "server_workers", lambda url: workers)
    CALLS.clear()


def test_each_push_sends_the_current_weights_and_finishes_with_the_policy_version(monkeypatch):
    _fake_vllm(monkeypatch)
    first = [("w", torch.ones(2, 2)), ("b", torch.zeros(3))]
    transfer = nccl_wire.NCCLTransfer("http://server", first, "127.0.0.1", 1234, timeout=5.0)
    assert CALLS == [
        ("init", 3, ["w", "b"])
    ]  # 1 trainer + the server's 2 workers, planned from the first push
    transfer.send([("w", 2 * torch.ones(2, 2)), ("b", torch.ones(3))], version=7)
    assert CALLS[1:] == [("start",), ("sent", [("w", 8.0), ("b", 3.0)]), ("finish", "7")]
    transfer.shutdown()
    assert CALLS[-1] == ("shutdown",)


def test_the_vllm_classes_fields_and_routes_used_are_vllms():
    from tests.unit.bench.test_vllm_routes import vllm_source

    src = vllm_source()
    nccl = (src / "distributed/weight_transfer/nccl_engine.py").read_text()
    assert "class NCCLTrainerWeightTransferEngine(TrainerWeightTransferEngine[NCCLTrainerInitInfo])" in nccl
    for name in ("master_address: str", "master_port: int", "world_size: int", "packed: bool = True"):
        assert name in nccl
    assert (
        "def trainer_init(\n        cls,\n        init_info: NCCLTrainerInitInfo,\n        *,\n        client"
        in nccl
    )
    assert "self.client.finish_weight_update()" in nccl  # no version: the client adds it
    base = (src / "distributed/weight_transfer/base.py").read_text()
    assert "rank: int = field(kw_only=True)" in base and "def iter_full(self)" in base
    assert "must be a functools.cached_property" in base  # metadata's required form
    clients = (src / "distributed/weight_transfer/clients.py").read_text()
    assert "def __init__(self, base_url: str, timeout: float = 300)" in clients
    assert "def finish_weight_update(self, weight_version: str | None = None)" in clients
    router = (src / "entrypoints/rl/online/api_router.py").read_text()
    assert '{"world_size": world_size}' in router  # the route itself: test_vllm_routes


def test_the_vllm_serve_flags_are_vllms():
    from tests.unit.bench.test_vllm_routes import vllm_source

    cmd = vllm_serve_command("MODEL", 8100, 2)
    assert cmd[:3] == ["vllm", "serve", "MODEL"]
    src = vllm_source()
    arg_utils = (src / "engine/arg_utils.py").read_text()
    for flag in ("--tensor-parallel-size", "--logprobs-mode", "--weight-transfer-config"):
        assert flag in cmd and f'"{flag}"' in arg_utils
    frontend = (src / "entrypoints/common/cli_args.py").read_text()
    assert "host: str | None = None" in frontend and "port: int = 8000" in frontend
    assert '"processed_logprobs"' in (src / "config/model.py").read_text()


def test_the_http_engine_pauses_pushes_over_nccl_and_resumes(monkeypatch):
    """`HTTPEngine(weight_transfer="nccl")` against the CPU double's routes: the group opened at
    construction, each update between the server's pause and resume, by vLLM's `send_weights`."""
    import copy

    from bench.engines.double_server import DoubleServer, serve
    from bench.engines.http_engine import HTTPEngine
    from bench.models.tiny import new_tiny_model

    _fake_vllm(monkeypatch, workers=None)  # the double's own /get_world_size answers: 1 worker
    model, tok = new_tiny_model(0)
    server = DoubleServer(copy.deepcopy(model), tok, max_batch_size=4)
    http = serve(server)
    paused: list[bool] = []
    send = nccl_wire.NCCLTransfer.send

    def send_while_paused(self, named, version):
        paused.append(server.paused)
        send(self, named, version)

    monkeypatch.setattr(nccl_wire.NCCLTransfer, "send", send_while_paused)
    try:
        engine = HTTPEngine(
            [f"http://127.0.0.1:{http.server_address[1]}"], model, tok, weight_transfer="nccl"
        )
        engine.update_weights(model.state_dict(), 3)
        engine.close()
    finally:
        http.shutdown()
        http.server_close()
        server.close()
    finishes = [c for c in CALLS if c[0] == "finish"]
    assert CALLS[0][:2] == ("init", 2) and finishes == [("finish", "0"), ("finish", "3")]
    assert paused == [True, True] and not server.paused and CALLS[-1] == ("shutdown",)
