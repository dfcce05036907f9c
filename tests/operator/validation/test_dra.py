"""GPU pools on Dynamic Resource Allocation (Kubernetes 1.31's core/v1 PodResourceClaim and
ResourceRequirements.claims): a claim in place of nvidia.com/gpu limits, its device count
stated in the spec (the claim template is an object the operator does not read) and held
to the ranks as GPU limits are."""

from __future__ import annotations

from typing import Any

from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, role

CLAIMS = {"spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two-h100"}]}}


def _dra(tp: int = 2, devices: int | None = 2, claim: str = "gpus") -> dict[str, Any]:
    extra: dict[str, Any] = {"podTemplate": CLAIMS}
    if devices is not None:
        extra["claimedDevices"] = devices
    return role("cuda", tensorParallelSize=tp, resources={"claims": [{"name": claim}]}, **extra)


def _obj(prefill: dict[str, Any]) -> dict[str, Any]:
    gpus = {"limits": {"nvidia.com/gpu": 2}}
    return body(
        engine="vllm", prefill=prefill, decode=role("cuda", tensorParallelSize=2, resources=gpus)
    )


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    return {p.field: p.message for p in validation.parse(obj)[1]}


def test_a_claim_in_place_of_gpu_limits_renders_on_the_pod_and_its_engine() -> None:
    obj = _obj(_dra())
    assert _fields(obj) == {}
    pod = next(
        p
        for p in by_kind(render.render(obj, hmac_key="k"), "Pod")
        if p["metadata"]["name"] == "demo-prefill-0"
    )
    assert pod["spec"]["resourceClaims"] == CLAIMS["spec"]["resourceClaims"]
    engine = pod["spec"]["containers"][0]
    assert engine["resources"]["claims"] == [{"name": "gpus"}]
    assert "limits" not in engine["resources"]


def test_the_claims_device_count_meets_the_tp_check() -> None:
    (message,) = _fields(_obj(_dra(tp=2, devices=1))).values()
    assert "1 devices for tensorParallelSize 2" in message
    fields = _fields(_obj(_dra(tp=2, devices=4)))
    assert "2 would sit idle" in fields["spec.prefill.claimedDevices"]


def test_a_claim_without_its_device_count_is_refused() -> None:
    fields = _fields(_obj(_dra(devices=None)))
    assert "required" in fields["spec.prefill.claimedDevices"]


def test_a_container_claim_must_name_a_pod_claim() -> None:
    fields = _fields(_obj(_dra(claim="other")))
    assert "podTemplate.spec.resourceClaims" in fields["spec.prefill.resources.claims[0].name"]


def test_no_gpu_limit_and_no_claim_names_both_ways() -> None:
    fields = _fields(_obj(role("cuda", tensorParallelSize=2)))
    message = fields["spec.prefill.resources.limits"]
    assert "nvidia.com/gpu" in message and "resources.claims" in message


def test_claimed_devices_beside_gpu_limits_is_refused() -> None:
    prefill = role(
        "cuda", tensorParallelSize=2, resources={"limits": {"nvidia.com/gpu": 2}}, claimedDevices=2
    )
    assert "spec.prefill.claimedDevices" in _fields(_obj(prefill))
