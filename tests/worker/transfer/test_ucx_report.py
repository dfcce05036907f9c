"""UCX's protocol report read as data, on reports UCX printed here.

tests/worker/transfer/data/ucx-1.23.0-proto-info-*.log are the UCX logs (``UCX_PROTO_INFO=y``)
of ``disagg worker wire probe`` reading a ``disagg worker wire peer``'s 1 MiB buffer, both
processes on one host, UCX 1.23.0 as nixl-cu12 1.5.1 bundles it: ``processes`` with UCX's
defaults (NIXL's READ over CMA), ``processes-tcp`` with ``UCX_TLS=tcp`` forced, and
``podman-pods`` between two pods of `disagg up --runtime podman` (the worker-cpu image).
"""

from __future__ import annotations

from pathlib import Path

from disagg_worker.transfer.rules.ucx_report import (
    INTER_NODE,
    INTRA_NODE,
    READ,
    SELF,
    Chosen,
    Row,
    chosen_read,
    selections,
)

DATA = Path(__file__).parent / "data"


def _report(name: str) -> str:
    return (DATA / f"ucx-1.23.0-proto-info-{name}.log").read_text()


def test_every_table_of_a_report_is_read_with_its_scope_and_operation() -> None:
    found = selections(_report("processes"))
    titles = {(s.scope, s.config) for s in found}
    # NIXL's worker connects to itself (self, cfg#0) and to the peer (intra-node, cfg#1)
    assert titles == {(SELF, 0), (INTRA_NODE, 1)}
    reads = [s for s in found if s.operation.startswith(READ)]
    assert [s.scope for s in reads] == [INTRA_NODE]
    assert reads[0].operation == "remote memory read by ucp_get*(multi) into host memory from host"
    assert reads[0].rows == (Row("0..inf", "zero-copy", "cma/memory"),)
    # active messages: three size ranges, all over tcp on loopback
    am = next(
        s
        for s in found
        if s.scope == INTRA_NODE and s.operation.endswith("ucp_am_send* from host memory")
    )
    assert [r.span for r in am.rows] == ["0", "1..16515", "16516..inf"]
    assert am.transports() == ("tcp",)


def test_the_read_between_two_processes_takes_cma_by_default() -> None:
    assert chosen_read(_report("processes")) == Chosen(
        scope=INTRA_NODE, transports=("cma",), devices=("memory",), protocols=("zero-copy",)
    )


def test_a_forced_tcp_read_is_tcp_in_software() -> None:
    found = chosen_read(_report("processes-tcp"))
    assert found == Chosen(
        scope=INTRA_NODE, transports=("tcp",), devices=("lo",), protocols=("software emulation",)
    )
    assert found.describe() == "tcp/lo software emulation (intra-node)"


def test_a_report_without_a_read_to_a_peer_names_nothing() -> None:
    report = _report("processes")
    # only the tables of the worker's own loopback endpoint: no peer was read
    own = "\n".join(line for line in report.splitlines() if "cfg#1" not in line)
    assert selections(own) and chosen_read(own) is None
    assert chosen_read("") is None
    assert chosen_read("2026-12-07 NIXL INFO Backend UCX was instantiated\n") is None


def test_lanes_are_transport_and_device_pairs() -> None:
    assert Row("0..inf", "zero-copy", "cma/memory").lanes() == (("cma", "memory"),)
    assert Row("0", "short", "tcp/eth0").lanes() == (("tcp", "eth0"),)
    assert Row("0", "short", "").lanes() == ()


def test_between_two_pods_the_peer_is_inter_node_and_the_read_goes_over_tcp() -> None:
    """``podman-pods``: the canary's probe in the decode pod of `disagg up --runtime podman`
    against the prefill pod's wire peer, each pod its own namespaces, the rendered
    ``UCX_TLS=tcp,self``; UCX's log prefix names the pod (its hostname)."""
    report = _report("podman-pods")
    assert {s.scope for s in selections(report)} == {SELF, INTER_NODE}
    found = chosen_read(report)
    assert found == Chosen(
        scope=INTER_NODE, transports=("tcp",), devices=("eth0",), protocols=("software emulation",)
    )
