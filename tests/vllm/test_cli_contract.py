"""Every `vllm serve` the operator renders, judged by vLLM itself: its CLI parser, its
KVTransferConfig, its env table and its NIXL buffer-device table."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.render.objects import render

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
GPU = {"limits": {"nvidia.com/gpu": 1, "memory": "24Gi"}}
CPU = {"limits": {"cpu": "8", "memory": "16Gi"}}


def _example(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / name).read_text())
    body["metadata"].update(namespace="default", uid="u")
    return body


def _variant(**spec: Any) -> dict[str, Any]:
    body = _example("vllm-cpu.yaml")
    for key, value in spec.items():
        body["spec"][key] = {**body["spec"].get(key, {}), **value}
    return body


def _bodies() -> dict[str, dict[str, Any]]:
    bodies = {
        path.name: _example(path.name)
        for path in sorted((ROOT / "examples").glob("*.yaml"))
        if yaml.safe_load(path.read_text())["spec"]["engine"]["type"] == "vllm"
    }
    bodies["decode-tp2"] = _variant(
        decode={"tensorParallelSize": 2, "resources": {"limits": {"cpu": "4", "memory": "12Gi"}}}
    )
    bodies["gpu-gpu"] = _variant(
        prefill={"device": "cuda", "resources": copy.deepcopy(GPU), "kvBufferDevice": "cuda"},
        decode={"device": "cuda", "resources": copy.deepcopy(GPU), "kvBufferDevice": "cuda"},
    )
    bodies["gpu-cpu-derived"] = _variant(
        prefill={
            "device": "cuda",
            "resources": copy.deepcopy(GPU),
            "kvBufferDevice": None,
            "acceleratorMemory": "16Gi",
            "args": None,
        },
        decode={"resources": copy.deepcopy(CPU), "kvBufferDevice": None, "args": None},
        # a pair of different devices declares what vLLM's hash would compare
        modelConfig={
            "dtype": "float16",
            "kvCacheDtype": "auto",
            "blockSize": 32,
            "quantization": "fp8",
        },
    )
    bodies["custom-port-side-channel"] = _variant(kvTransfer={"sideChannelPort": 7100})
    return bodies


CASES = [
    pytest.param(body, pod, id=f"{name}:{pod['metadata']['name']}")
    for name, body in _bodies().items()
    for pod in render(body, hmac_key="k")
    if pod["kind"] == "Pod"
]


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = pod["spec"]["containers"][0]
    return container


def _argv(pod: dict[str, Any]) -> list[str]:
    c = _engine(pod)
    return [*c["command"], *c.get("args", [])]


@pytest.mark.parametrize(("body", "pod"), CASES)
def test_vllm_parses_the_rendered_command(serve_parser: Any, body: Any, pod: Any) -> None:
    argv = _argv(pod)
    args, engine_args = serve_parser.parse(argv)
    model = body["spec"]["model"]
    if model.startswith("pvc://"):  # the claim is mounted at /mnt/models, served by name
        path = model.removeprefix("pvc://").partition("/")[2]
        assert args.model == f"/mnt/models/{path}"
        assert engine_args.served_model_name == [path.rsplit("/", 1)[-1]]
    else:
        assert args.model == model
    assert args.port == int(argv[argv.index("--port") + 1])
    tp = int(argv[argv.index("--tensor-parallel-size") + 1])
    assert engine_args.tensor_parallel_size == tp
    rendered = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    kv = engine_args.kv_transfer_config
    assert kv is not None, "vLLM dropped --kv-transfer-config"
    for key, value in rendered.items():
        assert getattr(kv, key) == value, f"{key}: vLLM has {getattr(kv, key)!r}"
    assert kv.kv_role in ("kv_producer", "kv_consumer")
    assert kv.is_kv_producer == (pod["metadata"]["labels"]["disagg.dev/role"] == "prefill")


@pytest.mark.parametrize(("body", "pod"), CASES)
def test_vllm_knows_every_rendered_env_name(body: Any, pod: Any) -> None:
    import vllm.envs

    known = set(vllm.envs.environment_variables)
    rendered = [e["name"] for e in _engine(pod)["env"] if e["name"].startswith("VLLM_")]
    unknown = sorted(set(rendered) - known)
    assert not unknown, f"vLLM {vllm.__version__} does not know {unknown}: a silent no-op"


@pytest.mark.parametrize(("body", "pod"), CASES)
def test_buffer_device_is_one_vllm_supports(body: Any, pod: Any) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import utils

    device = body["spec"][pod["metadata"]["labels"]["disagg.dev/role"]]["device"]
    argv = _argv(pod)
    buffer = json.loads(argv[argv.index("--kv-transfer-config") + 1])["kv_buffer_device"]
    from disagg_contract import platforms

    row = platforms.get_platform(device).vllm_device  # rocm runs as vLLM's cuda
    assert buffer in utils._NIXL_SUPPORTED_DEVICE.get(row, ()), (
        f"vLLM's NixlConnector has no {buffer} buffer on {device}"
    )


def test_the_platform_table_matches_vllms() -> None:
    """Our device → buffer-device table is vLLM's, for every device vLLM lists."""
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import utils

    from disagg_contract import platforms

    ours = {name: set(p.buffer_devices) for name, p in platforms.platforms().items()}
    for device, buffers in utils._NIXL_SUPPORTED_DEVICE.items():
        assert ours.get(device) == set(buffers), (
            f"{device}: ours {ours.get(device)}, vLLM {buffers}"
        )
    # Platforms vLLM runs under another device type (rocm as cuda) take that row.
    for name, platform in platforms.platforms().items():
        row = utils._NIXL_SUPPORTED_DEVICE.get(platform.vllm_device)
        if row is not None:
            assert set(platform.buffer_devices) == set(row), (name, platform.vllm_device)


def test_the_memory_flags_are_read_as_vllm_reads_them(serve_parser: Any) -> None:
    """The host-buffer check reads --kv-cache-memory-bytes and --gpu-memory-utilization:
    units as vLLM's own parser takes them, and the default of the version we name."""
    from vllm.config.cache import CacheConfig

    from disagg_operator.engines.vllm import contract

    for text in ("8G", "8g", "1.5k", "512M", "3t", "123"):
        args, _ = serve_parser.parse(["vllm", "serve", "m", "--kv-cache-memory-bytes", text])
        assert contract.human_readable_int(text) == args.kv_cache_memory_bytes, text
    assert CacheConfig().gpu_memory_utilization == contract.GPU_MEMORY_UTILIZATION_DEFAULT
