"""Derived KV-transfer values every engine shares: the buffer device of each role, its
UCX transports, whether the two pools run different attention layouts, the lease, what
RDMA adds to a pool (env, networks, IPC_LOCK), UCX's settings for a pool that moves KV over
TCP, the canary's bandwidth floor, and the wire the canary's wire probe should find.

The platform table is a value passed in (the operator's settings: the built-ins plus what
its platforms file declares), never a registry read here. Engine-specific values (vLLM's
flags and env) live in each engine's folder.
"""

from __future__ import annotations

from disagg_contract import platforms, ucx
from disagg_contract.platforms import Table
from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.rdma import Rdma


def buffer_device(spec: DeploymentSpec, role: str, table: Table) -> str:
    """kv_buffer_device of ``role``: the user's, else derived from its and its peer's device."""
    mine = spec.role(role)
    if mine.kv_buffer_device is not None:
        return mine.kv_buffer_device
    return platforms.derive_buffer_device(mine.device, spec.peer(role).device, table)


def ucx_tls(spec: DeploymentSpec, role: str, table: Table) -> str:
    """UCX_TLS of ``role``: the override, else the platform's transports (over RDMA: rc and
    ud, no tcp)."""
    if spec.kv_transfer.ucx_tls:
        return spec.kv_transfer.ucx_tls
    tls = platforms.get_platform(spec.role(role).device, table).ucx_tls
    found = rdma(spec, role)
    return ucx.rdma_tls(tls) if found is not None and found.transport == "ucx" else tls


def rdma(spec: DeploymentSpec, role: str) -> Rdma | None:
    """``role``'s RDMA block: its own, else the deployment's (None: no RDMA)."""
    return spec.role(role).rdma or spec.kv_transfer.rdma


# libfabric's provider for AWS EFA, and EFA's RDMA reads (NIXL's LIBFABRIC backend reads).
LIBFABRIC_ENV = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}
UCX_NET_DEVICES = "UCX_NET_DEVICES"
UCX_IB_GID_INDEX = "UCX_IB_GID_INDEX"
MULTUS_NETWORKS = "k8s.v1.cni.cncf.io/networks"
# RDMA registers (pins) the KV buffers: the engine needs to lock that much memory.
IPC_LOCK = "IPC_LOCK"
# The KV bandwidth (GB/s) below which a canary on an RDMA pair says SlowTransport: far
# under what an RDMA NIC moves (12-50 GB/s), far over TCP across a CNI (~0.1-1 GB/s).
RDMA_FLOOR_GBPS = 1.0


def transport_env(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """The env ``role``'s engine reads for its KV transport (render adds it to the engine
    container; an entry of the role's own ``env`` wins): over RDMA, UCX's NICs and GID
    index or libfabric's provider; else, where KV goes over UCX TCP, :func:`tcp_env`."""
    found = rdma(spec, role)
    if found is None:
        return tcp_env(spec, role)
    if found.transport == "libfabric":
        return dict(LIBFABRIC_ENV)
    env = {}
    if found.devices:
        env[UCX_NET_DEVICES] = ",".join(found.devices)
    if found.gid_index is not None:
        env[UCX_IB_GID_INDEX] = str(found.gid_index)
    return env


def tcp_env(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """UCX's TCP settings (:data:`disagg_contract.ucx.TCP_SETTINGS`) for a pool that moves KV
    over UCX TCP: no RDMA block (over RDMA UCX_TLS drops tcp, or libfabric moves the KV)
    and a ``spec.kvTransfer.ucxTls`` that, if given, carries tcp. Every built-in
    platform's list carries tcp; a platforms file's list without it still gets them, and
    there they change nothing (UCX reads UCX_TCP_* only for the tcp transport)."""
    if rdma(spec, role) is not None:
        return {}
    tls = spec.kv_transfer.ucx_tls
    if tls is not None and not ucx.carries_tcp(tls):
        return {}
    return ucx.tcp_env()


def rdma_env_names() -> tuple[str, ...]:
    """Every env name :func:`transport_env` sets for an RDMA pool (refused in that pool's
    spec.<role>.env; the TCP settings are not: a user's value wins)."""
    return (*LIBFABRIC_ENV, UCX_NET_DEVICES, UCX_IB_GID_INDEX)


def bandwidth_floor(spec: DeploymentSpec) -> float | None:
    """The least KV bandwidth (GB/s) the decode pods' canaries accept: the canary's field,
    else the RDMA block's floor (its field, else :data:`RDMA_FLOOR_GBPS`) when the pair
    runs RDMA; None: no floor."""
    given = spec.transfer_canary.min_bandwidth_gbytes_per_second
    if given is not None:
        return given
    blocks = [rdma(spec, role) for role in ROLES]
    floors = [b.min_bandwidth_gbytes_per_second or RDMA_FLOOR_GBPS for b in blocks if b]
    return min(floors) if floors else None


def expected_wires(spec: DeploymentSpec, table: Table) -> dict[str, tuple[str, ...]]:
    """The wires a decode pod's wire probe may find UCX using, by where UCX sees the
    prefill pod. ``inter-node`` (its own namespaces, as two pods have): rdma where an RDMA
    block models it, else tcp (an RDMA NIC nobody modelled is a surprise too), as far as
    the decode's UCX_TLS allows. ``intra-node`` (one host, shared namespaces: processes,
    or pods sharing the host's): shared memory, whatever the list says: tcp there is the
    quiet fallback of a failed CUDA IPC or CMA (vLLM PR #55906). Empty where libfabric
    moves the KV (no UCX to ask)."""
    found = rdma(spec, "decode") or rdma(spec, "prefill")
    if found is not None and found.transport == "libfabric":
        return {}
    allowed = ucx.wires_of(ucx_tls(spec, "decode", table))
    modelled = ucx.RDMA if found is not None else ucx.TCP
    between = (modelled,) if modelled in allowed else tuple(sorted(allowed & {ucx.RDMA, ucx.TCP}))
    return {"intra-node": (ucx.SHARED_MEMORY,), "inter-node": between}


def mixed_attention(spec: DeploymentSpec) -> bool:
    """The pools run different attention backends (different device types)."""
    return spec.prefill.device != spec.decode.device


def lease_seconds(spec: DeploymentSpec) -> int:
    """The block lease in whole seconds (at least 1), as engines that take ints read it."""
    return max(1, round(spec.kv_transfer.block_lease_seconds))
