"""The pair check that stands in for vLLM's handshake compatibility hash where the operator
turns it off (pools of different devices: their attention backends differ, so the hash
never matches). Facts from vLLM 0.32.0 and 0.33.0 (their sdists): the hash covers the vLLM
version, model, dtype and KV-cache dtype (nixl/metadata.py), not quantization; with it off
only byte sizes are compared (bf16 and fp16 pass); a CPU decode's repack refuses an fp8 KV
(platforms/cpu.py pack_kv_cache); CPU attention takes block sizes in multiples of 32."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from disagg_operator.validation.spec import Problem
from tests.operator.builders import by_kind, role, vllm_gpu_cpu

PAIR = {"dtype": "bfloat16", "kvCacheDtype": "auto", "blockSize": 64}
NIXL = "1.5.1"


def _mixed(model: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    obj = vllm_gpu_cpu(**spec)
    obj["spec"]["modelConfig"] = dict(PAIR if model is None else model)
    for r in ("prefill", "decode"):
        obj["spec"][r]["nixlVersion"] = NIXL
    obj["spec"]["decode"]["image"] = "example.com/vllm-cpu:v0.32.0"
    obj["spec"]["engine"]["image"] = "example.com/vllm:v0.32.0"
    return obj


def _problems(obj: dict[str, Any]) -> list[Problem]:
    return validation.parse(obj)[1]


def _commands(obj: dict[str, Any]) -> dict[str, list[str]]:
    pods = by_kind(render.render(obj, hmac_key="k"), "Pod")
    return {
        p["metadata"]["labels"]["disagg.dev/role"]: next(
            c for c in p["spec"]["containers"] if c["name"] == "engine"
        )["command"]
        for p in pods
    }


def _value(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


def test_a_declared_pair_renders_one_dtype_kv_dtype_and_block_size_on_both_pools() -> None:
    obj = _mixed()
    assert _problems(obj) == []
    commands = _commands(obj)
    for flag, value in (
        ("--dtype", "bfloat16"),
        ("--kv-cache-dtype", "auto"),
        ("--block-size", "64"),
    ):
        assert {_value(args, flag) for args in commands.values()} == {value}


@pytest.mark.parametrize("missing", ["dtype", "kvCacheDtype", "blockSize"])
def test_a_mixed_pair_must_declare_each_fact_the_hash_would_compare(missing: str) -> None:
    model = {k: v for k, v in PAIR.items() if k != missing}
    (p,) = _problems(_mixed(model))
    assert p.field == f"spec.modelConfig.{missing}"
    assert "'cuda' prefill" in p.message and "'cpu' decode" in p.message
    assert "handshake compatibility check is off" in p.message


def test_a_float16_prefill_against_a_bfloat16_decode_is_refused_naming_both() -> None:
    obj = _mixed({"kvCacheDtype": "auto", "blockSize": 64})
    obj["spec"]["prefill"]["args"] = ["--dtype", "float16"]
    obj["spec"]["decode"]["args"] = ["--dtype=bfloat16"]
    (differ,) = [p.message for p in _problems(obj) if "differently" in p.message]
    assert "prefill float16" in differ and "decode bfloat16" in differ


def test_a_same_device_pair_keeps_vllm_s_hash_but_its_args_must_still_agree() -> None:
    gpu = {"limits": {"nvidia.com/gpu": 1}}
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"] = role("cuda", resources=gpu, acceleratorMemory="24Gi")
    assert _problems(obj) == []  # nothing to declare: vLLM compares dtypes itself
    obj["spec"]["prefill"]["args"] = ["--quantization", "fp8"]
    (p,) = _problems(obj)
    # quantization is in no version's hash: two pools must agree even where the hash is on
    assert p.field == "spec.modelConfig.quantization"
    assert "prefill fp8, decode unset" in p.message


def test_the_model_config_value_cannot_be_restated_in_args() -> None:
    obj = _mixed()
    obj["spec"]["decode"]["args"] = ["--dtype", "bfloat16"]
    (p,) = _problems(obj)
    assert p.field == "spec.decode.args[0]" and "spec.modelConfig.dtype" in p.message


def test_a_cpu_decode_reads_no_fp8_kv_over_nixl() -> None:
    (p,) = _problems(_mixed({**PAIR, "kvCacheDtype": "fp8"}))
    assert p.field == "spec.modelConfig.kvCacheDtype"
    assert "FP8 KV cache is not yet supported with KV transfer on CPU" in p.message
    assert "set auto" in p.message


def test_a_cpu_decode_s_block_size_is_a_multiple_of_32() -> None:
    (p,) = _problems(_mixed({**PAIR, "blockSize": 16}))
    assert p.field == "spec.modelConfig.blockSize" and "multiple of 32" in p.message


def test_unknown_dtypes_are_refused_by_the_schema() -> None:
    problems = _problems(_mixed({**PAIR, "dtype": "auto"}))
    assert [p.field for p in problems] == ["spec.modelConfig.dtype"]


def test_the_pools_run_one_nixl_release() -> None:
    obj = _mixed()
    obj["spec"]["decode"]["nixlVersion"] = "1.4.1"
    (p,) = _problems(obj)
    assert p.field == "spec.decode.nixlVersion"
    assert "prefill 1.5.1, decode 1.4.1" in p.message
    del obj["spec"]["decode"]["nixlVersion"]
    (p,) = _problems(obj)
    assert p.field == "spec.decode.nixlVersion" and "required" in p.message


def test_a_mixed_pair_with_an_untagged_image_must_name_its_vllm_version() -> None:
    obj = _mixed()
    obj["spec"]["decode"]["image"] = "example.com/vllm-cpu:latest"
    problems = _problems(obj)
    (p,) = [p for p in problems if p.field == "spec.engine.version"]
    assert "spec.decode.image" in p.message and "same vLLM" in p.message
    obj["spec"]["engine"]["version"] = "0.32.0"
    assert _problems(obj) == []


def test_differing_vllm_versions_are_refused() -> None:
    obj = _mixed()
    obj["spec"]["decode"]["image"] = "example.com/vllm-cpu:v0.33.0"
    (p,) = _problems(obj)
    assert p.field == "spec.engine.version" and "different vLLM versions" in p.message
