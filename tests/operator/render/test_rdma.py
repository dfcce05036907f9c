"""KV over RDMA: what spec.kvTransfer.rdma (and spec.<role>.rdma) renders into the pods, and
what is refused."""

from __future__ import annotations

from typing import Any

from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, env_of, role

GPU = {"limits": {"nvidia.com/gpu": 1}}
IB = {
    "resources": {"rdma/rdma_shared_device_a": 1},
    "networks": ["rdma-net"],
    "devices": ["mlx5_0:1", "mlx5_1:1"],
    "gidIndex": 3,
}


def _gpu_pair(**kv: Any) -> dict[str, Any]:
    return body(
        engine="vllm",
        prefill=role("cuda", resources=dict(GPU)),
        decode=role("cuda", resources=dict(GPU)),
        kvTransfer=kv,
    )


def _pods(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["labels"]["disagg.dev/role"]: p
        for p in by_kind(render.render(obj, hmac_key="k"), "Pod")
    }


def _engine(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "engine")


def test_rdma_renders_the_device_ipc_lock_nics_gid_and_networks_on_both_pools() -> None:
    for role_name, pod in _pods(_gpu_pair(rdma=IB)).items():
        engine = _engine(pod)
        env = env_of(engine)
        assert env["UCX_TLS"] == "rc,ud,cuda_copy,self", role_name  # no tcp to fall back to
        assert env["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:1"
        assert env["UCX_IB_GID_INDEX"] == "3"
        assert engine["resources"]["limits"] == {
            "nvidia.com/gpu": 1,
            "rdma/rdma_shared_device_a": 1,
        }
        assert engine["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
        assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "rdma-net"


def test_without_rdma_nothing_is_added() -> None:
    for pod in _pods(_gpu_pair()).values():
        engine = _engine(pod)
        assert env_of(engine)["UCX_TLS"] == "rc,ud,tcp,cuda_copy,self"
        assert "UCX_NET_DEVICES" not in env_of(engine)
        assert "add" not in engine["securityContext"]["capabilities"]
        assert "k8s.v1.cni.cncf.io/networks" not in pod["metadata"]["annotations"]


def test_a_role_s_own_rdma_replaces_the_deployment_s() -> None:
    obj = _gpu_pair(rdma=IB)
    obj["spec"]["decode"]["rdma"] = {**IB, "devices": ["mlx5_4:1"]}
    pods = _pods(obj)
    assert env_of(_engine(pods["prefill"]))["UCX_NET_DEVICES"] == "mlx5_0:1,mlx5_1:1"
    assert env_of(_engine(pods["decode"]))["UCX_NET_DEVICES"] == "mlx5_4:1"


def test_efa_runs_libfabric() -> None:
    efa = {"transport": "libfabric", "resources": {"vpc.amazonaws.com/efa": 4}}
    obj = _gpu_pair(rdma=efa, backends=["LIBFABRIC"])
    for pod in _pods(obj).values():
        env = env_of(_engine(pod))
        assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
        assert _engine(pod)["resources"]["limits"]["vpc.amazonaws.com/efa"] == 4


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    return {p.field: p.message for p in validation.parse(obj)[1]}


def test_libfabric_needs_its_nixl_backend_and_takes_no_ucx_settings() -> None:
    fields = _fields(_gpu_pair(rdma={"transport": "libfabric", "devices": ["efa0"]}))
    assert "[LIBFABRIC]" in fields["spec.kvTransfer.backends"]
    assert "UCX" in fields["spec.kvTransfer.rdma.devices"]


def test_rdma_on_one_pool_only_is_refused() -> None:
    obj = _gpu_pair()
    obj["spec"]["prefill"]["rdma"] = IB
    fields = _fields(obj)
    assert "spec.decode.rdma" in fields and "both pools" in fields["spec.decode.rdma"]


def test_a_limit_the_rdma_block_also_sets_is_refused() -> None:
    obj = _gpu_pair(rdma=IB)
    obj["spec"]["prefill"]["resources"]["limits"]["rdma/rdma_shared_device_a"] = 2
    fields = _fields(obj)
    assert "spec.prefill.resources.limits[rdma/rdma_shared_device_a]" in fields


def test_rdma_resources_are_extended_resources() -> None:
    fields = _fields(_gpu_pair(rdma={"resources": {"memory": 1}}))
    assert "spec.kvTransfer.rdma.resources[memory]" in fields


def test_env_rdma_derives_is_refused() -> None:
    obj = _gpu_pair(rdma=IB)
    obj["spec"]["decode"]["env"] = [{"name": "UCX_NET_DEVICES", "value": "mlx5_9:1"}]
    fields = _fields(obj)
    assert "spec.kvTransfer.rdma" in fields["spec.decode.env[0]"]
