"""The wire a UCX transport moves bytes on, and the canary's ``--expect-wire`` form."""

from __future__ import annotations

import pytest

from disagg_contract import ucx
from disagg_contract.canary import expect_wire_args, parse_expect_wire


@pytest.mark.parametrize(
    ("transport", "wire"),
    [
        ("tcp", ucx.TCP),
        ("cma", ucx.SHARED_MEMORY),
        ("posix", ucx.SHARED_MEMORY),
        ("sysv", ucx.SHARED_MEMORY),
        ("cuda_ipc", ucx.SHARED_MEMORY),
        ("rc_mlx5", ucx.RDMA),
        ("dc_mlx5", ucx.RDMA),
        ("ud_verbs", ucx.RDMA),
        ("srd", ucx.RDMA),
        ("self", ucx.IN_PROCESS),
        ("cuda_copy", ucx.IN_PROCESS),
        ("a_new_one", ucx.UNKNOWN),
    ],
)
def test_each_transport_has_its_wire(transport: str, wire: str) -> None:
    assert ucx.wire(transport) == wire


@pytest.mark.parametrize(
    ("tls", "wires"),
    [
        ("tcp,self", {ucx.TCP}),
        ("rc,ud,tcp,cuda_copy,self", {ucx.RDMA, ucx.TCP}),
        ("rc,ud,cuda_copy,self", {ucx.RDMA}),
        ("tcp,cma,self", {ucx.TCP, ucx.SHARED_MEMORY}),
        ("all", {ucx.TCP, ucx.RDMA, ucx.SHARED_MEMORY}),
        ("^tcp", {ucx.RDMA, ucx.SHARED_MEMORY}),
        ("^cma", {ucx.TCP, ucx.RDMA, ucx.SHARED_MEMORY}),
    ],
)
def test_a_ucx_tls_value_allows_the_wires_of_its_names(tls: str, wires: set[str]) -> None:
    assert ucx.wires_of(tls) == wires


def test_expect_wire_round_trips_through_the_command_line() -> None:
    expected = {"inter-node": ("rdma",), "intra-node": ("shared-memory", "rdma")}
    args = expect_wire_args(expected)
    assert args == [
        "--expect-wire",
        "intra-node=shared-memory,rdma",
        "--expect-wire",
        "inter-node=rdma",
    ]
    assert dict(parse_expect_wire(v) for v in args[1::2]) == expected
    assert expect_wire_args({}) == []


@pytest.mark.parametrize("bad", ["tcp", "inter-node=", "elsewhere=tcp", "inter-node=tcp,carrier"])
def test_a_bad_expect_wire_names_the_form(bad: str) -> None:
    with pytest.raises(ValueError, match="give SCOPE=WIRE") as e:
        parse_expect_wire(bad)
    assert "intra-node, inter-node" in str(e.value) and "shared-memory" in str(e.value)
