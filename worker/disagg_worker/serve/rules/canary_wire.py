"""The canary's wire check: which wire UCX chose between this pod and a prefill pod, and
whether the deployment expects it there.

The wire probe (``disagg worker wire probe``, :mod:`disagg_worker.transfer.wire`)
prints what UCX's protocol report named; the operator's derivation says, per place UCX sees
the peer in (``intra-node``: one host, shared namespaces; ``inter-node``: anything else),
which wires it expects (``--expect-wire``, :func:`disagg_contract.canary.expect_wire_args`).
A wire outside that is ``UnexpectedTransport``: the path works (the canary passed), but not
as modelled, e.g. tcp where shared memory or RDMA was expected (docs/troubleshooting.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from disagg_contract.canary import UNEXPECTED_TRANSPORT

Expected = Mapping[str, tuple[str, ...]]  # scope -> the wires the deployment expects there


@dataclass(frozen=True)
class Wire:
    """What UCX chose for the wire probe's READ: where it saw the peer (``scope``), the
    wire (``tcp``, ``shared-memory``, ``rdma``...), and its own words (``chose``)."""

    scope: str
    wire: str
    chose: str


def wire_from(found: Mapping[str, Any]) -> Wire | None:
    """The wire a probe's JSON report names (None: it named none, or the probe failed)."""
    if found.get("ok") is not True or not all(found.get(k) for k in ("scope", "wire", "chose")):
        return None
    return Wire(str(found["scope"]), str(found["wire"]), str(found["chose"]))


def transport_problem(found: Wire | None, expected: Expected) -> str | None:
    """None unless ``found``'s wire is not one ``expected`` allows where UCX saw the peer;
    the message starts with :data:`UNEXPECTED_TRANSPORT` and names both. No finding, or
    nothing expected for that scope: no problem."""
    wanted = expected.get(found.scope) if found is not None else None
    if found is None or not wanted or found.wire in wanted:
        return None
    return (
        f"{UNEXPECTED_TRANSPORT}: UCX moved the wire probe's READ over {found.wire} "
        f"({found.chose}) where the deployment expects {' or '.join(wanted)} for an "
        f"{found.scope} peer; check UCX_TLS and UCX_NET_DEVICES in both pools' env, the "
        "RDMA device, and whether the pods may share memory (docs/troubleshooting.md)"
    )


def wire_fields(found: Wire | None, expected: Expected) -> dict[str, Any]:
    """The wire check as JSON fields (the canary's ``--once`` line, its pages): ``wire``,
    ``wire_scope``, ``wire_chose`` (null when not probed) and ``wire_expected``."""
    return {
        "wire": None if found is None else found.wire,
        "wire_scope": None if found is None else found.scope,
        "wire_chose": None if found is None else found.chose,
        "wire_expected": {scope: list(wires) for scope, wires in expected.items()},
    }
