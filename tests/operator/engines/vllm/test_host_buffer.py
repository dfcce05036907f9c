"""A GPU pool with kvBufferDevice cpu: vLLM's host mirror of its device KV cache is
counted against its memory limit (numbers derived by hand below, not by the code)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, role


def _gpu_prefill(
    memory: str, *, args: list[str] | None = None, version: str | None = "0.33.0", **extra: Any
) -> dict[str, Any]:
    """A cuda prefill with a cpu buffer; vLLM 0.33.0 (a fixed 0.92 share) unless told."""
    resources = {"limits": {"nvidia.com/gpu": 1, "memory": memory}}
    prefill = role("cuda", kvBufferDevice="cpu", resources=resources, **extra)
    if args:
        prefill["args"] = args
    obj = body(engine="vllm", prefill=prefill, modelConfig={"weightsMemory": "6Gi"})
    if version is not None:
        obj["spec"]["engine"]["version"] = version
    return obj


def _memory_problems(obj: dict[str, Any]) -> list[str]:
    return [
        p.message
        for p in validation.parse(obj)[1]
        if p.field == "spec.prefill.resources.limits.memory"
    ]


def test_an_80g_gpu_s_host_buffer_does_not_fit_24gi() -> None:
    # 80 GiB x 0.92 - 6 GiB of weights = 67.6 GiB of KV mirrored; + 3 GiB runtime = 70.6
    (message,) = _memory_problems(_gpu_prefill("24Gi", acceleratorMemory="80Gi"))
    assert "67.6 GiB" in message and "set at least 71Gi" in message
    assert _memory_problems(_gpu_prefill("71Gi", acceleratorMemory="80Gi")) == []


@pytest.mark.parametrize(
    ("args", "fits", "need"),
    [
        (["--gpu-memory-utilization", "0.5"], "37Gi", "set at least 37Gi"),  # 40 - 6 + 3
        (["--kv-cache-memory-bytes", "8G"], "11Gi", "set at least 11Gi"),  # 8 GiB (vLLM: G=2^30)
        (["--kv-cache-memory-bytes=8g"], "11Gi", "set at least 11Gi"),  # 8e9 B = 7.45 GiB + 3
    ],
)
def test_vllm_s_own_flags_size_the_buffer(args: list[str], fits: str, need: str) -> None:
    assert _memory_problems(_gpu_prefill(fits, acceleratorMemory="80Gi", args=args)) == []
    (message,) = _memory_problems(_gpu_prefill("4Gi", acceleratorMemory="80Gi", args=args))
    assert need in message


# (vLLM version, prefill args, the share vLLM plans for, the source) — config/cache.py
# gpu_memory_utilization and resolved_gpu_memory_utilization, config/vllm.py (the extensible
# KV cache's default), nixl/connector.py kv_cache_access (a cpu buffer: IN_PROCESS)
SHARES = [
    ("0.33.0", [], 0.92, "cache.py: Field(default=0.92)"),
    ("0.34.0", [], 1.0, "cache.py: None → 1.0 with the extensible KV cache (on for CUDA)"),
    (
        "0.34.0",
        ["--no-enable-extensible-kv-cache"],
        0.92,
        "cache.py: DEFAULT_GPU_MEMORY_UTILIZATION",
    ),
    (None, [], 1.0, "an unknown version reads as the newest checked (0.34.0)"),
]


@pytest.mark.parametrize(("version", "args", "share", "source"), SHARES)
def test_the_version_s_default_share_sizes_the_buffer(
    version: str | None, args: list[str], share: float, source: str
) -> None:
    kv = 80 * share - 6  # GiB of device KV mirrored on the host
    need = f"set at least {math.ceil(kv + 3)}Gi"
    obj = _gpu_prefill("24Gi", acceleratorMemory="80Gi", args=args, version=version)
    (message,) = _memory_problems(obj)
    assert f"{round(kv, 1):g} GiB" in message and need in message, source


def test_only_a_cuda_alike_device_plans_the_whole_device() -> None:
    assert vllm.gpu_memory_utilization_default(True, (0, 34, 0), []) == 1.0
    assert vllm.gpu_memory_utilization_default(True, (0, 33, 0), []) == 0.92
    assert vllm.gpu_memory_utilization_default(False, (0, 34, 0), []) == 0.92


def _size_problems(obj: dict[str, Any]) -> list[str]:
    return [
        p.message for p in validation.parse(obj)[1] if p.field == "spec.prefill.acceleratorMemory"
    ]


def test_a_host_buffer_of_unknown_size_is_refused_naming_the_three_fixes() -> None:
    (message,) = _size_problems(_gpu_prefill("24Gi", acceleratorMemory=None))
    assert "host copy of the whole device KV cache" in message
    assert "e.g. 80Gi" in message and "--kv-cache-memory-bytes" in message
    assert "nodeSelector nvidia.com/gpu.memory" in message
    # vLLM's own cap sizes it without the device's memory
    capped = _gpu_prefill("24Gi", acceleratorMemory=None, args=["--kv-cache-memory-bytes", "8G"])
    assert _size_problems(capped) == []


def test_gpu_feature_discovery_s_memory_label_sizes_the_buffer() -> None:
    # nvidia.com/gpu.memory is MiB: 81559 MiB = 79.65 GiB; x 0.92 - 6 = 67.3 GiB + 3 GiB runtime
    pinned = {"nvidia.com/gpu.memory": "81559"}
    obj = _gpu_prefill("24Gi", acceleratorMemory=None, nodeSelector=pinned)
    assert _size_problems(obj) == []
    (message,) = _memory_problems(obj)
    assert "67.3 GiB" in message and "set at least 71Gi" in message
    assert _memory_problems(_gpu_prefill("71Gi", acceleratorMemory=None, nodeSelector=pinned)) == []


def test_no_host_buffer_on_a_gpu_pair_with_cuda_buffers() -> None:
    gpu_to_gpu = body(
        engine="vllm",
        prefill=role("cuda", resources={"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}}),
        decode=role("cuda", resources={"limits": {"nvidia.com/gpu": 1}}),
    )
    assert validation.parse(gpu_to_gpu)[1] == []  # a cuda buffer: no host copy, no size


def test_integer_flags_are_read_as_vllm_reads_them() -> None:
    assert vllm.human_readable_int("8G") == 8 * 2**30
    assert vllm.human_readable_int("8g") == 8 * 10**9
    assert vllm.human_readable_int("1.5k") == 1500
    assert vllm.human_readable_int("123") == 123
    with pytest.raises(ValueError):
        vllm.human_readable_int("8Gi")
