"""KV over RDMA: :class:`Rdma`, the transport block of ``spec.kvTransfer.rdma`` and of
``spec.<role>.rdma`` (a pool whose NICs differ).

Part of :mod:`disagg_operator.api`. What it derives (UCX_TLS without tcp, the
NICs, the GID index, libfabric's provider, IPC_LOCK, the device resource, Multus networks)
is :mod:`disagg_operator.derive.transfer`'s.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from disagg_operator.api.base import _Model


class Rdma(_Model):
    """KV over RDMA: the device a pod requests, the networks and NICs it uses, and what the
    engine is told (docs/security.md: such pods need Pod Security's privileged level)."""

    transport: Literal["ucx", "libfabric"] = Field(
        default="ucx",
        description="ucx: InfiniBand or RoCE through UCX (UCX_TLS derived without tcp, so "
        "a missing RDMA device fails at the handshake instead of crossing the CNI over "
        "TCP); libfabric: AWS EFA through NIXL's LIBFABRIC backend (FI_PROVIDER efa)",
    )
    resources: dict[str, int] | None = Field(
        default=None,
        description="the RDMA device resource each pod requests, added to the engine "
        "container's limits, e.g. {rdma/rdma_shared_device_a: 1} (NVIDIA network operator), "
        "{vpc.amazonaws.com/efa: 4}",
    )
    networks: list[Annotated[str, StringConstraints(pattern=r"^[a-z0-9][-a-z0-9./@]*$")]] | None = (
        Field(
            default=None,
            description="Multus networks of the pods (the k8s.v1.cni.cncf.io/networks "
            "annotation): NetworkAttachmentDefinition names, namespace/name or "
            "name@interface",
        )
    )
    devices: (
        list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+(:[0-9]+)?$")]] | None
    ) = Field(
        default=None,
        description="ucx: the NICs UCX may use (UCX_NET_DEVICES, e.g. [mlx5_0:1, "
        "mlx5_1:1]: on an 8-NIC node, the ones nearest the pod's GPUs); all when omitted",
    )
    gid_index: int | None = Field(
        default=None,
        ge=0,
        le=255,
        description="ucx on RoCE: the GID table index (UCX_IB_GID_INDEX, e.g. 3 for RoCE v2 "
        "over IPv4 on many hosts); UCX's choice when omitted",
    )
    min_bandwidth_gbytes_per_second: float | None = Field(
        default=None,
        gt=0,
        description="the least KV bandwidth (GB/s) the transfer canary accepts on this "
        "pair before TransferPathReady says SlowTransport; default 1 (an RDMA path moves "
        "a canary's KV far faster; TCP over a CNI rarely does)",
    )
