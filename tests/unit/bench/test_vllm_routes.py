"""The routes, bodies and payload fields the HTTP engine and the CPU double speak, read back from
vLLM's own source (not its docs): route decorators, the names of the route functions' parameters
and the fields of the pydantic models and dataclasses, parsed with `ast`.

The source is looked for in $BENCH_VLLM_SRC, /tmp/vllm-src/vllm, then an installed vllm; each
test skips, naming where it looked, when none is there.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

import pytest

from bench.engines.vllm_routes import SAMPLING_FIELDS, PauseMode, Route, generate_body, generate_response
from bench.engines.weight_wire import _chunks, init_info, update_info


def vllm_source() -> Path:
    """vLLM's package directory, or skip."""
    candidates = [os.environ.get("BENCH_VLLM_SRC"), "/tmp/vllm-src/vllm"]
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        candidates.append(str(Path(spec.origin).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "entrypoints/rl/online/api_router.py").exists():
            return Path(candidate)
    pytest.skip(
        "vLLM's source is not here (set BENCH_VLLM_SRC, unpack it at /tmp/vllm-src/vllm or install the gpu extra)"
    )


def parse(relative: str) -> ast.Module:
    return ast.parse((vllm_source() / relative).read_text())


def routes(relative: str) -> dict[tuple[str, str], list[str]]:
    """(METHOD, path) -> the route function's parameter names, from `@router.get/post(path)`."""
    out = {}
    for node in ast.walk(parse(relative)):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.args:
                    if isinstance(dec.args[0], ast.Constant) and dec.func.attr in ("get", "post"):
                        out[(dec.func.attr.upper(), dec.args[0].value)] = [a.arg for a in node.args.args]
    return out


def fields(relative: str, cls: str) -> set[str]:
    """The annotated fields of class `cls` in `relative` (its own body, not its bases)."""
    for node in ast.walk(parse(relative)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return {
                s.target.id
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    raise AssertionError(f"{cls} not found in {relative}")


RL = "entrypoints/rl/online/api_router.py"
TOKENS = "entrypoints/scale_out/token_in_token_out/"


def test_the_rl_routes_exist_with_our_methods_and_body_names():
    found = routes(RL)
    expected = {
        Route.PAUSE: ("POST", "mode"),
        Route.RESUME: ("POST", None),
        Route.IS_PAUSED: ("GET", None),
        Route.INIT_WEIGHT_TRANSFER: ("POST", "init_info"),
        Route.START_WEIGHT_UPDATE: ("POST", None),
        Route.UPDATE_WEIGHTS: ("POST", "update_info"),
        Route.FINISH_WEIGHT_UPDATE: ("POST", "weight_version"),
        Route.WEIGHT_INFO: ("GET", None),
        Route.SHUTDOWN_WEIGHT_TRANSFER: ("POST", None),
        Route.GET_WORLD_SIZE: ("GET", None),
    }
    for route, (method, param) in expected.items():
        assert (method, str(route)) in found, f"{method} {route} not in vLLM's {RL}"
        assert param is None or param in found[(method, str(route))]
    source = (vllm_source() / RL).read_text()
    assert '"is_paused": paused' in source and '"weight_version": weight_version' in source


def test_generate_and_health_routes():
    assert ("POST", str(Route.GENERATE)) in routes(TOKENS + "api_router.py")
    assert ("GET", str(Route.HEALTH)) in routes("entrypoints/serve/instrumentator/health.py")
    launcher = (vllm_source() / "entrypoints/launchers/api_server/routers.py").read_text()
    dev = launcher.index("if envs.VLLM_SERVER_DEV_MODE:")
    assert dev < launcher.index("register_rl_api_routers(app)")  # the RL routes need VLLM_SERVER_DEV_MODE=1
    # the serve flags docs/backends.md gives
    arg_utils = (vllm_source() / "engine/arg_utils.py").read_text()
    assert '"--weight-transfer-config"' in arg_utils and '"--logprobs-mode"' in arg_utils
    assert '"processed_logprobs"' in (vllm_source() / "config/model.py").read_text()


def test_pause_modes_are_vllms():
    source = (vllm_source() / "v1/engine/__init__.py").read_text()
    assert 'PauseMode = Literal["abort", "wait", "keep"]' in source
    assert [m.value for m in PauseMode] == ["abort", "wait", "keep"]


def test_generate_bodies_use_vllms_field_names():
    from bench.engines.base import GenerationRequest, SamplingParams

    body = generate_body("r", [1, 2], GenerationRequest("r", [1], SamplingParams(), 0), 5, 7)
    assert set(body) <= fields(TOKENS + "protocol.py", "GenerateRequest")
    assert (
        set(body["sampling_params"]) == set(SAMPLING_FIELDS) <= fields("sampling_params.py", "SamplingParams")
    )
    response = generate_response("r", [3], [-0.5], "stop", [{"version": "1", "start": 0, "end": 1}])
    assert set(response) - {"choices", "output_mode"} <= fields(
        TOKENS + "protocol.py", "GenerateResponseBase"
    )
    choice = response["choices"][0]
    assert set(choice) - {"logprobs"} <= fields(TOKENS + "protocol.py", "GenerateChoiceBase")
    assert "logprobs" in fields(TOKENS + "protocol.py", "GenerateTokensChoice")
    assert set(choice["logprobs"]) <= fields(TOKENS + "protocol.py", "GenerateLogProbs")
    assert set(choice["logprobs"]["content"][0]) <= fields(TOKENS + "protocol.py", "GenerateLogProb")
    assert set(choice["weight_versions"][0]) == fields("outputs.py", "WeightVersionSpan")
    assert "stop_reason" in fields(TOKENS + "protocol.py", "GenerateChoiceBase")


def test_weight_transfer_payloads_use_vllms_field_names():
    import torch

    init = init_info("127.0.0.1", 1234, 2)
    assert set(init) <= fields("distributed/weight_transfer/nccl_common.py", "NCCLWeightTransferInitInfo")
    update = update_info([("w", torch.zeros(2, 3, dtype=torch.bfloat16))])
    assert update == {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2, 3]]}
    assert set(update) <= fields("distributed/weight_transfer/nccl_engine.py", "NCCLWeightTransferUpdateInfo")
    engine = (vllm_source() / "distributed/weight_transfer/nccl_engine.py").read_text()
    assert 'return str(dtype).split(".")[-1]' in engine  # vLLM's dtype wire names, as ours
    assert 'del payload["src"]' in engine  # a single broadcaster's update info has no src


def test_packing_cuts_buffers_by_vllms_rule():
    packing = (vllm_source() / "distributed/weight_transfer/packed_tensor.py").read_text()
    assert "if total_bytes > buffer_size_bytes:\n            break" in packing
    assert "if packing_tensor_sizes[buffer_idx] > target_packed_tensor_size:" in packing
    # hand-computed: add a tensor, close the buffer once its bytes pass the size
    assert list(_chunks([4, 4, 4], 5)) == [[0, 1], [2]]
    assert list(_chunks([4, 4, 4], 8)) == [[0, 1, 2]]
    assert list(_chunks([9, 1], 8)) == [[0], [1]]
