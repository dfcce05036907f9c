"""UCX's TCP settings in the rendered pods: every pool that moves KV over UCX TCP, none over
RDMA or a transport list without tcp, and a user's own value always kept; and the wire a
canary's wire probe should find, by where UCX sees the peer."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_contract import ucx
from disagg_operator.derive import transfer
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, env_of, role

TX, RX = "UCX_TCP_TX_SEG_SIZE", "UCX_TCP_RX_SEG_SIZE"
GPU = {"limits": {"nvidia.com/gpu": 1}}
IB = {"resources": {"rdma/rdma_shared_device_a": 1}, "devices": ["mlx5_0:1"]}


def _engines(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """role → the engine container's env, as rendered."""
    out = {}
    for pod in by_kind(render.render(obj, hmac_key="k"), "Pod"):
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        out[pod["metadata"]["labels"]["disagg.dev/role"]] = env_of(engine)
    return out


def _gpu_pair(**kv: Any) -> dict[str, Any]:
    return body(
        engine="vllm",
        prefill=role("cuda", resources=dict(GPU)),
        decode=role("cuda", resources=dict(GPU)),
        kvTransfer=kv,
    )


def test_the_settings_grow_a_reads_reply_no_further_than_a_default_peer_takes() -> None:
    env = ucx.tcp_env()
    assert set(env) == {TX}  # RX stays UCX's own: every peer's takes what the other sends
    assert env[TX] == ucx.DEFAULT_RX_SEG_SIZE != "8kb"


@pytest.mark.parametrize("engine", ["reference", "vllm"])
def test_cpu_pools_move_kv_over_tcp_with_larger_segments(engine: str) -> None:
    for name, env in _engines(body(engine=engine)).items():
        assert env["UCX_TLS"] == "tcp,self", name
        assert {k: env[k] for k in (TX,)} == ucx.tcp_env() and RX not in env, name


def test_a_gpu_pool_without_rdma_keeps_them_for_its_tcp_fallback() -> None:
    for env in _engines(_gpu_pair()).values():
        assert "tcp" in env["UCX_TLS"].split(",")
        assert env[TX] == ucx.tcp_env()[TX]


def test_rdma_pools_get_none() -> None:
    for env in _engines(_gpu_pair(rdma=IB)).values():
        assert "tcp" not in env["UCX_TLS"].split(",")
        assert TX not in env and RX not in env


@pytest.mark.parametrize(
    ("tls", "tuned"),
    [("tcp,cma,self", True), ("all", True), ("^cma", True), ("^tcp", False), ("rc,ud", False)],
)
def test_an_override_gets_them_exactly_when_it_carries_tcp(tls: str, tuned: bool) -> None:
    for env in _engines(body(kvTransfer={"ucxTls": tls})).values():
        assert env["UCX_TLS"] == tls
        assert (TX in env) is tuned and RX not in env


def test_a_users_own_value_is_never_overridden() -> None:
    mine = [{"name": TX, "value": "1m"}, {"name": RX, "value": "1m"}]
    obj = body(decode=role(env=mine))
    dd, problems = validation.parse(obj)
    assert dd is not None and problems == [], problems  # not refused: a user may tune them
    envs = _engines(obj)
    assert envs["decode"][TX] == envs["decode"][RX] == "1m"
    assert envs["prefill"][TX] == ucx.tcp_env()[TX]


def test_the_names_render_refuses_under_rdma_are_the_rdma_ones_only() -> None:
    assert not set(ucx.tcp_env()) & set(transfer.rdma_env_names())


def _expected(obj: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems, problems
    return transfer.expected_wires(dd.spec, DEFAULT.platforms)


EFA = {"transport": "libfabric", "resources": {"vpc.amazonaws.com/efa": 4}}


@pytest.mark.parametrize(
    ("obj", "inter"),
    [
        (body(), ("tcp",)),  # cpu pools (tcp,self)
        (body(kvTransfer={"ucxTls": "tcp,cma,self"}), ("tcp",)),
        # RDMA modelled (rc,ud,cuda_copy,self): rdma, never tcp
        (_gpu_pair(rdma=IB), ("rdma",)),
        # GPUs without an RDMA block: tcp between pods (an unmodelled NIC is a surprise)
        (_gpu_pair(), ("tcp",)),
    ],
)
def test_the_wire_expected_between_pods_follows_what_is_modelled(
    obj: dict[str, Any], inter: tuple[str, ...]
) -> None:
    # on one host with shared namespaces, shared memory whatever UCX_TLS says: tcp there
    # is the fallback of a failed CUDA IPC or CMA
    assert _expected(obj) == {"intra-node": ("shared-memory",), "inter-node": inter}


def test_libfabric_expects_no_ucx_wire() -> None:
    assert _expected(_gpu_pair(rdma=EFA, backends=["LIBFABRIC"])) == {}
