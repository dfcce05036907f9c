"""Models: camelCase on the wire, snake_case in Python, defaults, unknown fields refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from disagg_operator import api as models
from tests.operator.builders import body


def test_constants_name_the_api() -> None:
    assert (models.GROUP, models.VERSION, models.KIND) == (
        "disagg.dev",
        "v1alpha1",
        "DisaggregatedDeployment",
    )
    assert models.PLURAL == "disaggregateddeployments"
    assert models.SHORT_NAMES == ["disagg"]
    assert models.API_VERSION == "disagg.dev/v1alpha1"


def test_camel_case_wire_and_snake_case_python() -> None:
    spec = models.DeploymentSpec.model_validate(
        body(prefill={"device": "cpu", "tensorParallelSize": 1, "kvBufferDevice": "cpu"})["spec"]
    )
    assert spec.prefill.tensor_parallel_size == 1
    assert spec.prefill.kv_buffer_device == "cpu"
    dumped = spec.model_dump(by_alias=True, exclude_none=True)
    assert dumped["prefill"]["kvBufferDevice"] == "cpu"
    assert dumped["kvTransfer"]["sideChannelPort"] == 5600


def test_populate_by_python_name() -> None:
    role = models.RoleSpec(tensor_parallel_size=2, kv_buffer_device="cpu")
    assert role.model_dump(by_alias=True)["tensorParallelSize"] == 2


def test_defaults() -> None:
    spec = models.DeploymentSpec.model_validate(body()["spec"])
    assert spec.kv_transfer.backends == ["UCX"]
    assert spec.kv_transfer.connector == "NixlConnector"
    assert spec.kv_transfer.side_channel_port == 5600
    assert spec.prefill.replicas == 1 and spec.prefill.kv_buffer_device is None
    assert spec.llmd.enabled is False and spec.llmd.inference_pool.enabled is True
    assert spec.llmd.inference_pool.version == "v1"  # the GA API; v1alpha2 only on request


def test_default_lists_are_not_shared() -> None:
    a = models.KVTransfer()
    a.backends.append("GDS")
    assert models.KVTransfer().backends == ["UCX"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("prefill", "replicas"), -1),
        (("prefill", "tensorParallelSize"), 0),
        (("kvTransfer",), {"connector": "LMCacheConnectorV1"}),
        (("kvTransfer",), {"backends": []}),
        (("engine",), {"type": "vLLM", "image": "x"}),
        (("prefill", "device"), "CUDA"),
        (("prefill", "replicaCount"), 2),
    ],
)
def test_schema_violations_raise(path: tuple[str, ...], value: object) -> None:
    spec = body()["spec"]
    target = spec
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError):
        models.DeploymentSpec.model_validate(spec)


def test_role_and_peer_accessors() -> None:
    spec = models.DeploymentSpec.model_validate(
        body(prefill={"device": "cuda"}, decode={"device": "cpu"})["spec"]
    )
    assert spec.role("prefill").device == "cuda" and spec.peer("prefill").device == "cpu"
    assert spec.role("decode").device == "cpu" and spec.peer("decode").device == "cuda"
