"""The CPU KV tier of a vLLM GPU pool (spec.<role>.kvOffloadMemory): its rendered
``--kv-transfer-config``, its memory check and its refusals; and ``--config`` refused in
args. Sizes are worked out by hand in the comments, not by the code. vLLM's own classes
judge the rendered config in tests/vllm/test_cpu_tier.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import EXAMPLES, GPU, body, example, role

GIB = 1024**3


def _gpus(memory: str = "40Gi", version: str = "0.32.0", **prefill: Any) -> dict[str, Any]:
    resources = {"limits": {**GPU["limits"], "memory": memory}}
    obj = body(
        engine="vllm",
        prefill=role("cuda", resources=copy.deepcopy(resources), **prefill),
        decode=role("cuda", resources=copy.deepcopy(resources)),
    )
    obj["spec"]["engine"]["version"] = version
    return obj


def _kv(obj: dict[str, Any], pool: str = "prefill") -> dict[str, Any]:
    pods = [o for o in render(obj, hmac_key="k" * 32) if o["kind"] == "Pod"]
    (pod,) = [p for p in pods if p["metadata"]["labels"]["disagg.dev/role"] == pool][:1]
    command = pod["spec"]["containers"][0]["command"]
    return dict(json.loads(command[command.index("--kv-transfer-config") + 1]))


def _problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.field, p.message) for p in validation.parse(obj)[1]]


def test_a_tier_wraps_the_p_d_connector_and_each_child_carries_its_own_fields() -> None:
    obj = _gpus(kvOffloadMemory="16Gi")
    obj["spec"]["kvTransfer"] = {"kvLoadFailurePolicy": "recompute"}
    kv = _kv(obj)
    assert (kv["kv_connector"], kv["kv_role"], kv["kv_buffer_device"]) == (
        "MultiConnector",
        "kv_producer",
        "cuda",
    )
    assert kv["kv_load_failure_policy"] == "recompute"
    nixl, offload = kv["kv_connector_extra_config"]["connectors"]
    # the P/D connector's whole config, as the pool without a tier renders it
    plain = _gpus()
    plain["spec"]["kvTransfer"] = {"kvLoadFailurePolicy": "recompute"}
    assert nixl == _kv(plain)
    assert nixl["kv_load_failure_policy"] == "recompute" and nixl["kv_buffer_device"] == "cuda"
    assert offload == {
        "kv_connector": "OffloadingConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": 16 * GIB},
    }
    # decode has no tier: its config is the P/D connector's alone
    assert _kv(obj, "decode")["kv_connector"] == "NixlConnector"


@pytest.mark.parametrize(
    ("args", "engines", "per_engine"),
    [
        (["--data-parallel-size", "2"], 2, 8 * GIB),
        (["-dp=3"], 3, (16 * GIB) // 3),
    ],
)
def test_a_pod_s_tier_is_split_among_its_data_parallel_engines(
    args: list[str], engines: int, per_engine: int
) -> None:
    obj = _gpus("60Gi", kvOffloadMemory="16Gi", args=args)
    obj["spec"]["prefill"]["resources"]["limits"]["nvidia.com/gpu"] = engines  # one each
    kv = _kv(obj)
    offload = kv["kv_connector_extra_config"]["connectors"][1]
    assert offload["kv_connector_extra_config"]["cpu_bytes_to_use"] == per_engine
    # the runtime is counted per engine: 16 GiB + 3 engines x 3 GiB = 25 GiB
    obj["spec"]["prefill"]["resources"]["limits"]["memory"] = f"{16 + 3 * engines - 1}Gi"
    (problem,) = _problems(obj)
    assert f"set at least {16 + 3 * engines}Gi" in problem[1]


def test_the_memory_limit_must_hold_the_tier_and_the_runtime() -> None:
    # 32 GiB tier + 3 GiB runtime (one rank) = 35 GiB
    (problem,) = _problems(_gpus("24Gi", kvOffloadMemory="32Gi"))
    assert problem[0] == "spec.prefill.resources.limits.memory"
    assert "32 GiB" in problem[1] and "set at least 35Gi" in problem[1]
    assert _problems(_gpus("35Gi", kvOffloadMemory="32Gi")) == []


def test_a_host_kv_buffer_is_counted_beside_the_tier_once() -> None:
    # 24 GiB device x 0.92 = 22.08 GiB mirrored + 8 GiB tier + 3 GiB runtime = 33.08 GiB
    obj = _gpus("30Gi", kvOffloadMemory="8Gi", kvBufferDevice="cpu")
    (problem,) = _problems(obj)
    assert problem[0] == "spec.prefill.resources.limits.memory"
    assert "22.1 GiB" in problem[1] and "set at least 34Gi" in problem[1]
    assert _problems(_gpus("34Gi", kvOffloadMemory="8Gi", kvBufferDevice="cpu")) == []


def test_a_tier_needs_a_memory_limit() -> None:
    obj = _gpus(kvOffloadMemory="8Gi")
    del obj["spec"]["prefill"]["resources"]["limits"]["memory"]
    (problem,) = _problems(obj)
    assert problem[0] == "spec.prefill.resources.limits.memory"
    assert "/dev/shm" in problem[1] and "set at least 11Gi" in problem[1]


def test_a_cpu_pool_is_refused_naming_why() -> None:
    obj = _gpus()
    obj["spec"]["decode"] = role("cpu", kvOffloadMemory="8Gi", resources={
        "limits": {"cpu": "8", "memory": "32Gi"}})  # fmt: skip
    obj["spec"]["modelConfig"] = {"dtype": "bfloat16", "kvCacheDtype": "auto", "blockSize": 64}
    (problem,) = _problems(obj)
    assert problem[0] == "spec.decode.kvOffloadMemory"
    assert "for GPU pools" in problem[1] and "host memory already" in problem[1]


@pytest.mark.parametrize(
    ("device", "version", "first"),
    [("cuda", "0.13.0", "0.14.0"), ("xpu", "0.22.1", "0.23.0")],
)
def test_versions_before_the_tier_s_first_on_the_device_are_refused(
    device: str, version: str, first: str
) -> None:
    obj = _gpus(kvOffloadMemory="8Gi", version=version)
    obj["spec"]["prefill"]["device"] = device
    obj["spec"]["prefill"]["resources"]["limits"] = {"memory": "40Gi"}
    found = [m for f, m in _problems(obj) if f == "spec.prefill.kvOffloadMemory"]
    assert len(found) == 1 and f"from vLLM {first}" in found[0] and version in found[0]
    obj["spec"]["engine"]["version"] = first
    assert not [m for f, m in _problems(obj) if f == "spec.prefill.kvOffloadMemory"]


@pytest.mark.parametrize(("given", "says"), [("lots", "not a Kubernetes quantity"),
                                             (0, "leaves none")])  # fmt: skip
def test_an_unusable_size_is_refused(given: Any, says: str) -> None:
    (problem,) = _problems(_gpus(kvOffloadMemory=given))
    assert problem[0] == "spec.prefill.kvOffloadMemory" and says in problem[1]


@pytest.mark.parametrize("arg", ["--config", "--config=/etc/vllm/serve.yaml"])
def test_a_config_file_in_args_is_refused(arg: str) -> None:
    obj = _gpus()
    obj["spec"]["decode"]["args"] = ["--max-num-seqs", "8", arg, "/etc/vllm/serve.yaml"][
        : 3 if "=" in arg else 4
    ]
    (problem,) = _problems(obj)
    assert problem[0] == "spec.decode.args[2]"
    assert "cannot read" in problem[1] and "kv-offloading-size" in problem[1]


def test_the_example_renders_a_tier_on_both_pools() -> None:
    (path,) = [p for p in EXAMPLES if p.name == "cuda-cpu-tier.yaml"]
    obj = example(path)
    assert _problems(obj) == []
    for pool in ("prefill", "decode"):
        kv = _kv(obj, pool)
        nixl, offload = kv["kv_connector_extra_config"]["connectors"]
        assert nixl["kv_connector"] == "NixlConnector"
        assert offload["kv_connector_extra_config"]["cpu_bytes_to_use"] == 64 * GIB
