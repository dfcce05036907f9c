"""Derived KV-transfer settings: what each pod's hardware needs, from the spec alone.

Pure layer, part of render. Every value the operator fills in for the user lives here,
with its reason, so docs/derivation.md is generated from the same code
(:func:`derivation_table`; ``python -m disagg_operator.render.derive`` prints it) and a
test keeps the two in sync.

kv_role: vLLM's NixlConnector does not act on kv_role (the proxy's kv_transfer_params
decide who reads from whom), and its docs list kv_producer for prefillers and
kv_consumer for decoders; we render those, so `kubectl get pod -o yaml` says which pod
plays which part. kv_both would behave the same.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from disagg_operator.models import DeploymentSpec, RoleSpec
from disagg_worker import platforms

KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}

# Where the handshake secret is mounted in every pod.
HMAC_DIR = "/etc/disagg/handshake"
HMAC_KEY = "hmac"
HMAC_PATH = f"{HMAC_DIR}/{HMAC_KEY}"

# vLLM's CPU engine: one core stays outside the OpenMP pool for the API server and the
# NIXL/UCX progress thread, when the pod has at least two cores.
CPU_RESERVED_CORES = 1
CPU_KVCACHE_FRACTION = 0.5

_GIB = 1024**3
_SUFFIX = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "m": 10**-3,
}
_QUANTITY = re.compile(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([A-Za-z]*)$")


def buffer_device(spec: DeploymentSpec, role: str) -> str:
    """kv_buffer_device of ``role``: the user's, else derived from its and its peer's device."""
    mine = spec.role(role)
    if mine.kv_buffer_device is not None:
        return mine.kv_buffer_device
    return platforms.derive_buffer_device(mine.device, spec.peer(role).device)


def ucx_tls(spec: DeploymentSpec, role: str) -> str:
    """UCX_TLS of ``role``: the override, else the platform's transports."""
    if spec.kv_transfer.ucx_tls:
        return spec.kv_transfer.ucx_tls
    return platforms.get_platform(spec.role(role).device).ucx_tls


def kv_transfer_config(spec: DeploymentSpec, role: str) -> dict[str, Any]:
    """vLLM's ``--kv-transfer-config`` as vLLM's KVTransferConfig parses it."""
    return {
        "kv_connector": spec.kv_transfer.connector,
        "kv_role": KV_ROLE[role],
        "kv_buffer_device": buffer_device(spec, role),
        "kv_connector_extra_config": {"backends": list(spec.kv_transfer.backends)},
    }


def side_channel_ports(spec: DeploymentSpec, role: str) -> list[int]:
    """Handshake ports one pod of ``role`` listens on: base + tp_rank (vLLM's scheme)."""
    base = spec.kv_transfer.side_channel_port
    return [base + rank for rank in range(spec.role(role).tensor_parallel_size)]


def parse_quantity(value: int | str) -> float:
    """A Kubernetes quantity ("16Gi", "500m", 2) as a number of base units."""
    if isinstance(value, int):
        return float(value)
    match = _QUANTITY.match(value.strip())
    if match is None or match.group(2) not in {"", *_SUFFIX}:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 16Gi, 500m, 2)")
    return float(match.group(1)) * _SUFFIX.get(match.group(2), 1)


def _limit(role: RoleSpec, name: str) -> float | None:
    resources = role.resources
    for source in (resources.limits, resources.requests) if resources else ():
        if source and name in source:
            return parse_quantity(source[name])
    return None


def cpu_engine_env(role: RoleSpec) -> dict[str, str]:
    """vLLM CPU-engine env for a pool on device cpu (empty for other devices)."""
    if role.device != "cpu":
        return {}
    env = {"VLLM_CPU_OMP_THREADS_BIND": "auto"}
    memory = _limit(role, "memory")
    if memory is not None:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, int(memory * CPU_KVCACHE_FRACTION // _GIB)))
    cores = _limit(role, "cpu")
    if cores is None or cores >= 2:
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(CPU_RESERVED_CORES)
    return env


# --- the documented table ---------------------------------------------------------------


def _buffer_rows() -> list[tuple[str, str, str, str]]:
    rows = []
    table = platforms.platforms()
    for device in sorted(table):
        for peer in sorted(table):
            derived = platforms.derive_buffer_device(device, peer)
            why = (
                "same device both sides: the native buffer"
                if device == peer
                else "different devices: stage through host memory (DRAM both ends)"
                if derived == "cpu"
                else "no host buffer on this platform: native buffer"
            )
            rows.append(("kvBufferDevice", f"device {device}, peer {peer}", derived, why))
    return rows


def derivation_rows() -> list[tuple[str, str, str, str]]:
    """(value, inputs, result, reason) for every derived value."""
    rows = _buffer_rows()
    for name, p in sorted(platforms.platforms().items()):
        rows.append(
            ("UCX_TLS", f"device {name}", p.ucx_tls, "unless kvTransfer.ucxTls; no cma/sm/cuda_ipc")
        )
        if p.gpu_resource:
            rows.append(("required limit", f"device {name}", p.gpu_resource, "gets the device"))
    rows += [
        ("kv_role", "role prefill", KV_ROLE["prefill"], "NixlConnector ignores it; docs' name"),
        ("kv_role", "role decode", KV_ROLE["decode"], "NixlConnector ignores it; docs' name"),
        ("side-channel host", "any", "pod IP (fieldRef status.podIP)", "peers dial the pod IP"),
        ("side-channel port", "TP rank r", "sideChannelPort + r", "vLLM's per-rank scheme"),
        ("NIXL backends", "any", "kvTransfer.backends (default UCX)", "checked per memory type"),
        ("VLLM_CPU_OMP_THREADS_BIND", "vllm, device cpu", "auto", "bind to the pod's cores"),
        (
            "VLLM_CPU_KVCACHE_SPACE",
            "vllm, device cpu, memory limit M",
            f"max(1, floor(M * {CPU_KVCACHE_FRACTION} / GiB))",
            "KV cache gets half the pod memory",
        ),
        (
            "VLLM_CPU_NUM_OF_RESERVED_CPU",
            "vllm, device cpu, ≥ 2 cores or no cpu limit",
            str(CPU_RESERVED_CORES),
            "a core for the API server and NIXL progress",
        ),
        ("VLLM_NIXL_ABORT_REQUEST_TIMEOUT", "vllm", "blockLeaseSeconds", "prefill frees blocks"),
    ]
    return rows


def derivation_table() -> str:
    """The markdown table in docs/derivation.md."""
    lines = ["| value | inputs | result | reason |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | `{c}` | {d} |" for a, b, c, d in derivation_rows()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(derivation_table())
