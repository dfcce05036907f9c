"""What is refused of a deployment's RDMA (``spec.kvTransfer.rdma``, ``spec.<role>.rdma``).

RDMA on one pool only (UCX's rc cannot meet a pool without it), libfabric without NIXL's
LIBFABRIC backend or with UCX-only settings, a device resource that is not an extended
resource or that the role's limits also set, and env the RDMA block derives.
"""

from __future__ import annotations

from collections.abc import Iterator

from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.derive import transfer
from disagg_operator.validation.corev1 import extended

LIBFABRIC = "LIBFABRIC"


def where(spec: DeploymentSpec, role: str) -> str:
    """The field path of ``role``'s RDMA block (its own, else the deployment's)."""
    return f"spec.{role}.rdma" if spec.role(role).rdma else "spec.kvTransfer.rdma"


def problems(spec: DeploymentSpec) -> Iterator[Problem]:
    blocks = {role: transfer.rdma(spec, role) for role in ROLES}
    if None in blocks.values() and any(blocks.values()):
        missing = next(r for r, b in blocks.items() if b is None)
        yield Problem(
            f"spec.{missing}.rdma",
            "RDMA must be set on both pools: the other pool's transports (rc, no tcp) "
            "cannot reach this one; set spec.kvTransfer.rdma for both, or spec.<role>.rdma "
            "on each",
        )
    seen: set[str] = set()
    for role, block in blocks.items():
        if block is None:
            continue
        at = where(spec, role)
        if at in seen:
            continue
        seen.add(at)
        if block.transport == "libfabric":
            if LIBFABRIC not in spec.kv_transfer.backends:
                yield Problem(
                    "spec.kvTransfer.backends",
                    f"{at}.transport libfabric moves KV through NIXL's LIBFABRIC backend; "
                    f"set spec.kvTransfer.backends: [{LIBFABRIC}]",
                )
            for name in ("devices", "gid_index"):
                if getattr(block, name) is not None:
                    camel = "gidIndex" if name == "gid_index" else name
                    yield Problem(
                        f"{at}.{camel}",
                        "a UCX setting: libfabric picks its EFA devices itself; remove it",
                    )
        for key in block.resources or {}:
            if not extended(key):
                yield Problem(
                    f"{at}.resources[{key}]",
                    f"{key!r} is not an RDMA device resource (an extended resource such as "
                    "rdma/rdma_shared_device_a or vpc.amazonaws.com/efa); set cpu and memory "
                    f"in spec.{role}.resources",
                )
    for role, block in blocks.items():
        given = spec.role(role).resources
        limits = (given.limits if given else None) or {}
        for key in (block.resources or {}) if block else {}:
            if key in limits:
                yield Problem(
                    f"spec.{role}.resources.limits[{key}]",
                    f"also set by {where(spec, role)}.resources; keep it in one place",
                )
