"""vLLM's CPU KV tier on accelerator pools (``spec.<role>.kvOffloadMemory``): its
``--kv-transfer-config`` (MultiConnector over NixlConnector and OffloadingConnector), its
host memory, and what refuses it.

Pure, part of the vLLM engine. Why MultiConnector and not vLLM's ``--kv-offloading-size``:
that flag replaces the configured connector, so P/D is gone. MultiConnector hands each
child its own dict and nothing else (:data:`.contract.CPU_TIER_SINCE`'s comment), so every
field a child reads is rendered in that child.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from disagg_contract import platforms
from disagg_contract.platforms import Table
from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.derive.resources import cpu_limits, parse_quantity
from disagg_operator.engines.base import Row
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import derive
from disagg_operator.engines.vllm import fields as own

_GIB = 1024**3


def engines_per_pod(spec: DeploymentSpec, role: str) -> int:
    """The vLLM engines one pod of ``role`` runs (its data-parallel size)."""
    return derive.data_parallel_size(spec.role(role))


def tier_bytes(spec: DeploymentSpec, role: str) -> float:
    """The CPU KV tier of one pod of ``role`` in bytes; 0 without one (or an unreadable
    quantity, which :func:`problems` refuses)."""
    given = own.role(spec, role).kv_offload_memory
    try:
        return parse_quantity(given) if given is not None else 0.0
    except ValueError:
        return 0.0


def engine_bytes(spec: DeploymentSpec, role: str) -> int:
    """``cpu_bytes_to_use`` of each engine: the pod's tier split evenly among its engines
    (every data-parallel engine maps a tier of its own that size)."""
    return int(tier_bytes(spec, role)) // engines_per_pod(spec, role)


def kv_transfer_config(spec: DeploymentSpec, role: str, nixl: dict[str, Any]) -> dict[str, Any]:
    """``nixl`` (the P/D connector's config) as it is without a tier, else MultiConnector
    over it and OffloadingConnector. The top level keeps the pool's kv_role (the scheduler
    reads its producer/consumer role there to 0.33.0; from 0.34.0 KVTransferConfig reads
    the children's roles alone, so the kv_both child makes each pool both), the buffer
    device and the failure policy."""
    if not tier_bytes(spec, role):
        return nixl
    offload = {
        "kv_connector": vllm.OFFLOADING_CONNECTOR,
        "kv_role": vllm.CPU_TIER_ROLE,
        "kv_connector_extra_config": {vllm.CPU_TIER_BYTES_KEY: engine_bytes(spec, role)},
    }
    top = {
        "kv_connector": vllm.MULTI_CONNECTOR,
        "kv_role": nixl["kv_role"],
        "kv_buffer_device": nixl["kv_buffer_device"],
        "kv_connector_extra_config": {"connectors": [nixl, offload]},
    }
    if "kv_load_failure_policy" in nixl:
        top["kv_load_failure_policy"] = nixl["kv_load_failure_policy"]
    return top


def problems(spec: DeploymentSpec, table: Table) -> Iterator[Problem]:
    """Each pool's tier: on a device vLLM offloads from, in a version that sizes it in
    bytes, at least a byte per engine, and held by the pod's memory limit."""
    version = derive.resolution(spec).version
    for role in ROLES:
        given = own.role(spec, role).kv_offload_memory
        if given is None:
            continue
        where = f"spec.{role}.kvOffloadMemory"
        try:
            parse_quantity(given)
        except ValueError as e:
            yield Problem(where, str(e))
            continue
        problem = _supported(spec, role, table, version)
        if problem is None:
            problem = _memory(spec, role, table)
        if problem is not None:
            yield problem


def _supported(
    spec: DeploymentSpec, role: str, table: Table, version: vllm.Version | None
) -> Problem | None:
    where, device = f"spec.{role}.kvOffloadMemory", spec.role(role).device
    since = vllm.CPU_TIER_SINCE.get(platforms.get_platform(device, table).vllm_device)
    if since is None:
        own_kv = (
            "; a cpu pool's KV cache is host memory already: give it more memory instead "
            "(its KV space derives from resources.limits.memory)"
            if device == "cpu"
            else ""
        )
        return Problem(
            where,
            f"a CPU KV tier is for GPU pools: vLLM's OffloadingConnector copies KV between "
            f"a CUDA-alike or XPU device and host memory, and device {device!r} is "
            f"neither{own_kv}; remove it",
        )
    if not vllm.reaches(version, since):
        shown = vllm.format_version(version) if version else "?"
        return Problem(
            where,
            f"vLLM {shown} cannot run a CPU KV tier beside NixlConnector on "
            f"{device!r}: OffloadingConnector takes its size in bytes (cpu_bytes_to_use) "
            f"there from vLLM {vllm.format_version(since)}; use a newer image or set "
            "spec.engine.version, or remove it",
        )
    if engine_bytes(spec, role) < 1:
        return Problem(
            where,
            f"{tier_bytes(spec, role):g} bytes for {engines_per_pod(spec, role)} engine(s) "
            "leaves none for each (vLLM refuses a tier of 0 bytes); give at least 1Gi",
        )
    return None


def _memory(spec: DeploymentSpec, role: str, table: Table) -> Problem | None:
    """The pod's memory limit holds the tier, the runtime and any host KV buffer: the tier
    is host memory (CUDA, from vLLM 0.20: /dev/shm, whose memory-backed volume the pod's
    limit sizes when it sets none of its own)."""
    r, tier = spec.role(role), tier_bytes(spec, role)
    memory = cpu_limits(r)[1]
    limit = f"spec.{role}.resources.limits.memory"
    if memory is None:
        return Problem(
            limit,
            f"required with kvOffloadMemory: the CPU KV tier ({tier / _GIB:.3g} GiB) is "
            "host memory, in /dev/shm, which Kubernetes sizes from the pod's memory limit; "
            f"set at least {_need(spec, role, table)}Gi",
        )
    buffer = derive.host_buffer_bytes(spec, role, table)
    if buffer is None:  # refused by checks.host_buffers (no device memory figure)
        return None
    need = _need(spec, role, table)
    if memory >= need * _GIB:
        return None
    held = f"a host KV buffer of {buffer / _GIB:.3g} GiB (kvBufferDevice cpu), " if buffer else ""
    return Problem(
        limit,
        f"{memory / _GIB:.3g} GiB cannot hold the CPU KV tier ({tier / _GIB:.3g} GiB over "
        f"{engines_per_pod(spec, role)} engine(s), kvOffloadMemory), {held}and vLLM's "
        f"runtime (~{derive.CPU_RUNTIME_GIB} GiB per rank); set at least {need}Gi or lower "
        "kvOffloadMemory",
    )


def _need(spec: DeploymentSpec, role: str, table: Table) -> int:
    """GiB a pod of ``role`` needs: its tier, its host KV buffer and the runtime per rank."""
    r = spec.role(role)
    buffer = derive.host_buffer_bytes(spec, role, table) or 0.0
    runtime = derive.pod_ranks(r) * derive.CPU_RUNTIME_GIB * _GIB  # every engine's ranks
    return math.ceil((tier_bytes(spec, role) + buffer + runtime) / _GIB)


def rows() -> list[Row]:
    """docs/derivation.md's rows of the tier."""
    since = ", ".join(f"{d} >= {vllm.format_version(v)}" for d, v in vllm.CPU_TIER_SINCE.items())
    where = "vllm, spec.<role>.kvOffloadMemory B, E engines per pod"
    return [
        (
            "kv_connector",
            f"{where} ({since})",
            f"{vllm.MULTI_CONNECTOR}: [the P/D connector's config, {vllm.OFFLOADING_CONNECTOR}]",
            "top level: the pool's kv_role, kv_buffer_device and kv_load_failure_policy "
            "(the scheduler's); each child carries its own fields (MultiConnector passes "
            "a child nothing but the engine id)",
        ),
        (
            f"{vllm.OFFLOADING_CONNECTOR} {vllm.CPU_TIER_BYTES_KEY}",
            where,
            f"floor(B / E), kv_role {vllm.CPU_TIER_ROLE}",
            "per engine over its TP ranks (each data-parallel engine maps its own); E: "
            "--data-parallel-size, else 1",
        ),
        (
            "memory limit (checked)",
            f"{where}, host KV buffer H, ranks per pod t (TP x E)",
            f">= B + H + t * {derive.CPU_RUNTIME_GIB} GiB",
            "the tier is host memory (/dev/shm from vLLM 0.20 on CUDA: the pod's limit "
            "sizes that volume); required with the tier; refused on cpu pools and before "
            "each device's first version",
        ),
    ]
