"""Derived KV-transfer values every engine shares: the buffer device of each role, its
UCX transports, whether the two pools run different attention layouts, the lease.

Pure layer, part of derive. The platform table is a value passed in (the operator's
settings: the built-ins plus what its platforms file declares), never a registry read
here. Engine-specific values (vLLM's flags and env) live in each engine's folder.
"""

from __future__ import annotations

from disagg_operator.api import DeploymentSpec
from disagg_worker import platforms
from disagg_worker.platforms import Table


def buffer_device(spec: DeploymentSpec, role: str, table: Table) -> str:
    """kv_buffer_device of ``role``: the user's, else derived from its and its peer's device."""
    mine = spec.role(role)
    if mine.kv_buffer_device is not None:
        return mine.kv_buffer_device
    return platforms.derive_buffer_device(mine.device, spec.peer(role).device, table)


def ucx_tls(spec: DeploymentSpec, role: str, table: Table) -> str:
    """UCX_TLS of ``role``: the override, else the platform's transports."""
    if spec.kv_transfer.ucx_tls:
        return spec.kv_transfer.ucx_tls
    return platforms.get_platform(spec.role(role).device, table).ucx_tls


def mixed_attention(spec: DeploymentSpec) -> bool:
    """The pools run different attention backends (different device types)."""
    return spec.prefill.device != spec.decode.device


def lease_seconds(spec: DeploymentSpec) -> int:
    """The block lease in whole seconds (at least 1), as engines that take ints read it."""
    return max(1, round(spec.kv_transfer.block_lease_seconds))
