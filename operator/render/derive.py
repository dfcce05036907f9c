"""Derived KV-transfer settings: what each pod's hardware needs, from the spec alone.

Pure layer, part of render. Every value the operator fills in for the user lives here,
with its reason, so docs/derivation.md is generated from the same code
(:func:`derivation_table`; ``python -m disagg_operator.render.derive`` prints it) and a
test keeps the two in sync. What vLLM accepts comes from the capability profile of the
deployment's vLLM version (:mod:`disagg_operator.engines.vllm`, :func:`resolution`);
no vLLM setting name is spelled here.

kv_role: kv_producer for prefill and kv_consumer for decode, valid in every vLLM
version; NixlConnector ignored it up to 0.22 and warns about kv_both from 0.23.
"""

from __future__ import annotations

import math
import re
import sys
from typing import Any

from disagg_operator.engines import vllm
from disagg_operator.models import ROLES, DeploymentSpec, RoleSpec
from disagg_operator.render import canary
from disagg_worker import platforms, ucx

KV_ROLE = {"prefill": "kv_producer", "decode": "kv_consumer"}
OMP_NUM_THREADS = "OMP_NUM_THREADS"

# Where the handshake secret is mounted in every pod.
HMAC_DIR = "/etc/disagg/handshake"
HMAC_KEY = "hmac"
HMAC_PATH = f"{HMAC_DIR}/{HMAC_KEY}"

# vLLM's CPU engine, per TP rank: memory beyond the KV cache (vLLM 0.32, tiny model,
# measured ~2.2 GB RSS; 3 GiB leaves room for weights of small models and allocator
# slack), the share of the rest given to the KV cache, and the smallest useful KV cache.
CPU_RUNTIME_GIB = 3
CPU_KVCACHE_FRACTION = 0.75
CPU_MIN_KV_GIB = 1
# Cores kept out of OpenMP: vLLM always runs NIXL's progress thread, which busy-polls one.
CPU_PROGRESS_CORES = 1

# Seconds left after the preStop drain for the engine to stop on SIGTERM (finish HTTP
# responses, deregister memory, close the NIXL agent) before the kubelet kills it.
SHUTDOWN_MARGIN_S = 10

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


def resolution(spec: DeploymentSpec) -> vllm.Resolution:
    """The vLLM version this deployment runs and its profile (engine.version, else tags)."""
    images: list[tuple[str, str]] = []
    for r in ROLES:
        own = spec.role(r).image
        images.append((f"spec.{r}.image", own) if own else ("spec.engine.image", spec.engine.image))
    return vllm.resolve(spec.engine.version, tuple(dict.fromkeys(images)))


def profile(spec: DeploymentSpec) -> vllm.Profile:
    return resolution(spec).profile


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


def mixed_attention(spec: DeploymentSpec) -> bool:
    """The pools run different attention backends (different device types)."""
    return spec.prefill.device != spec.decode.device


def lease_seconds(spec: DeploymentSpec) -> int:
    return max(1, round(spec.kv_transfer.block_lease_seconds))


def kv_transfer_config(spec: DeploymentSpec, role: str) -> dict[str, Any]:
    """vLLM's ``--kv-transfer-config`` as that version's KVTransferConfig parses it."""
    p, kv = profile(spec), spec.kv_transfer
    extra: dict[str, Any] = {"backends": list(kv.backends)}
    if p.lease.kind == "extra":
        extra[p.lease.name] = lease_seconds(spec)
    if p.handshake_compat_key and mixed_attention(spec):
        extra[p.handshake_compat_key] = False
    extra.update(kv.kv_connector_extra_config or {})
    config: dict[str, Any] = {
        "kv_connector": kv.connector,
        "kv_role": KV_ROLE[role],
        "kv_buffer_device": buffer_device(spec, role),
        "kv_connector_extra_config": extra,
    }
    if kv.kv_load_failure_policy and p.failure_policy_default:
        config["kv_load_failure_policy"] = kv.kv_load_failure_policy
    return config


def lease_env(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """The lease as env, for versions that read it there (prefill holds the blocks)."""
    lease = profile(spec).lease
    if lease.kind != "env" or role != "prefill":
        return {}
    return {lease.name: str(lease_seconds(spec))}


def drain_seconds(spec: DeploymentSpec) -> int:
    """How long a terminating pod waits (its preStop) for transfers it takes part in.

    reference: ceil(transferDeadlineSeconds + blockLeaseSeconds): prefill holds a block set
    at most the lease, and a decode read started as the hold ends runs at most the
    deadline. vllm: the lease as vLLM reads it (it has no per-transfer deadline setting).
    """
    kv = spec.kv_transfer
    if spec.engine.type == "vllm":
        return lease_seconds(spec)
    return math.ceil(kv.transfer_deadline_seconds + kv.block_lease_seconds)


def grace_period_seconds(spec: DeploymentSpec) -> int:
    """terminationGracePeriodSeconds: the drain, then time for the engine to stop."""
    return drain_seconds(spec) + SHUTDOWN_MARGIN_S


def side_channel_ports(spec: DeploymentSpec, role: str) -> list[int]:
    """Handshake ports one pod of ``role`` listens on, by the version's rule."""
    base, tp = spec.kv_transfer.side_channel_port, spec.role(role).tensor_parallel_size
    if spec.engine.type == "vllm" and not profile(spec).side_channel_per_tp_rank:
        return [base]  # one listener per engine on port + DP index; one engine per pod
    return [base + rank for rank in range(tp)]


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


def cpu_limits(role: RoleSpec) -> tuple[float | None, float | None]:
    """(CPUs, memory bytes) of a pool: CPUs from limits else requests, memory from limits."""
    memory = None
    if role.resources and role.resources.limits and "memory" in role.resources.limits:
        memory = parse_quantity(role.resources.limits["memory"])
    return _limit(role, "cpu"), memory


def cpu_min_memory_gib(tp: int) -> int:
    """Smallest memory limit a vLLM CPU pool of ``tp`` ranks runs in: runtime + 1 GiB KV."""
    return tp * (CPU_RUNTIME_GIB + CPU_MIN_KV_GIB)


def cpu_kvcache_gib(memory: float, tp: int) -> int:
    """KV cache per rank: a share of what the runtimes leave of the memory limit."""
    spare = (memory - tp * CPU_RUNTIME_GIB * _GIB) * CPU_KVCACHE_FRACTION / tp
    return max(CPU_MIN_KV_GIB, math.floor(spare / _GIB))


def cpu_threads(cpus: float, tp: int) -> int:
    """OpenMP threads per rank: the pod's whole cores less the progress core, split by TP."""
    return max(1, (math.floor(cpus) - CPU_PROGRESS_CORES) // tp)


def cpu_engine_env(role: RoleSpec, p: vllm.Profile) -> dict[str, str]:
    """vLLM CPU-engine env for a pool on device cpu (empty for other devices).

    nobind: OpenMP never pins, so two pods on one node cannot bind the same cores under
    either kubelet CPU policy; the thread count keeps the pool inside its CPU budget.
    """
    if role.device != "cpu":
        return {}
    cpus, memory = cpu_limits(role)
    tp = role.tensor_parallel_size
    env = {vllm.CPU_OMP_THREADS_BIND: "nobind"}
    if cpus is not None:
        env[OMP_NUM_THREADS] = str(cpu_threads(cpus, tp))
    env[vllm.CPU_RESERVED] = str(max(CPU_PROGRESS_CORES, p.reserved_cpus(tp)))
    if memory is not None:
        env[vllm.CPU_KVCACHE_SPACE] = str(cpu_kvcache_gib(memory, tp))
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
        why = "unless kvTransfer.ucxTls; no cma/sm/*_ipc" + (f"; {p.note}" if p.note else "")
        rows.append(("UCX_TLS", f"device {name}", p.ucx_tls, why))
        if p.accelerator_resource:
            rows.append(
                ("required limit", f"device {name}", p.accelerator_resource, "gets the device")
            )
        if p.vllm_device != name:
            rows.append(
                (
                    "vLLM device type",
                    f"device {name}",
                    p.vllm_device,
                    "what vLLM reports there; NixlConnector checks kv_buffer_device "
                    "against that row of its table",
                )
            )
    lease, compat = vllm.NEWEST.lease, vllm.NEWEST.handshake_compat_key
    since_extra = vllm.format_version(next(p.since for p in vllm.PROFILES if p.lease == lease))
    old_lease = vllm.PROFILES[0].lease.name
    port_rule = vllm.first_version("side_channel_per_tp_rank")
    one_port = vllm.format_version(
        next(p.since for p in vllm.PROFILES if not p.side_channel_per_tp_rank)
    )
    cpu = "vllm, device cpu"
    rows += [
        ("kv_role", "role prefill", KV_ROLE["prefill"], "valid in every version; no warning"),
        ("kv_role", "role decode", KV_ROLE["decode"], "valid in every version; no warning"),
        ("side-channel host", "any", "pod IP (fieldRef status.podIP)", "peers dial the pod IP"),
        (
            "side-channel port",
            f"vllm >= {one_port}",
            "sideChannelPort",
            "one listener per engine (port + DP index; one engine per pod)",
        ),
        (
            "side-channel port",
            f"vllm {port_rule}, TP rank r; reference engine",
            "sideChannelPort + r",
            "a listener per TP rank",
        ),
        ("NIXL backends", "any", "kvTransfer.backends (default UCX)", "checked per memory type"),
        (
            "preStop",
            "reference, deadline D, lease L",
            "disagg worker drain --timeout-s ceil(D + L)",
            "waits until /debug/blocks shows nothing held, used or waiting: a hold lasts at "
            "most L, a read started at its end at most D",
        ),
        (
            "preStop",
            "vllm, lease L",
            "sleep round(L)",
            "vLLM has no endpoint that says its transfers are done: wait out the lease",
        ),
        (
            "terminationGracePeriodSeconds",
            "the preStop's time T",
            f"T + {SHUTDOWN_MARGIN_S}",
            "the drain, then time for the engine to stop on SIGTERM",
        ),
        (
            f"extra config {lease.name}",
            f"vllm >= {since_extra}, both roles",
            "round(blockLeaseSeconds)",
            f"int seconds; decode heartbeats every lease // 6 s (so >= {lease.minimum})",
        ),
        (
            old_lease,
            f"vllm < {since_extra}, prefill",
            "round(blockLeaseSeconds)",
            f"prefill frees unread blocks; vLLM >= {since_extra} ignores this env",
        ),
        (
            f"extra config {compat}",
            f"vllm >= {vllm.first_version('handshake_compat_key')}, prefill device != decode "
            "device",
            "false",
            "the compat hash includes the attention backend, which differs across device "
            "types; same devices: omitted (vLLM's default true)",
        ),
        (
            "kv_load_failure_policy",
            f"vllm >= {vllm.first_version('failure_policy_default')}, "
            "kvTransfer.kvLoadFailurePolicy",
            "kvTransfer.kvLoadFailurePolicy",
            "top-level KVTransferConfig field; omitted: vLLM's default",
        ),
        (vllm.CPU_OMP_THREADS_BIND, cpu, "nobind", "never pin: no two pods share pinned cores"),
        (
            OMP_NUM_THREADS,
            f"{cpu}, C CPUs (limit, else request), TP t",
            f"max(1, (floor(C) - {CPU_PROGRESS_CORES}) // t)",
            "one core for NIXL's busy-polling progress thread",
        ),
        (
            vllm.CPU_RESERVED,
            f"{cpu}, TP t",
            f"max({CPU_PROGRESS_CORES}, vLLM's P/D minimum)",
            "vLLM >= 0.20 warns below 2 x t; 0.17-0.19 forces 1",
        ),
        (
            vllm.CPU_KVCACHE_SPACE,
            f"{cpu}, memory limit M, TP t",
            f"max(1, floor((M - t * {CPU_RUNTIME_GIB} GiB) * {CPU_KVCACHE_FRACTION} / t / GiB))",
            f"runtime ~{CPU_RUNTIME_GIB} GiB per rank (0.32: ~2.2 GB RSS measured); "
            f"M < t * {CPU_RUNTIME_GIB + CPU_MIN_KV_GIB} GiB is refused",
        ),
    ]
    return rows + canary.derivation_rows()


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def profile_table() -> str:
    """The per-version capability table in docs/derivation.md (from vllm.PROFILES)."""
    head = (
        "| vLLM | kv_buffer_device per device | default buffer | lease | handshake compat key "
        "| side channel "
        "| prefill TP > decode TP | kv_load_failure_policy | P/D reserved CPUs | "
        "NIXL pins CPU | CPU decode repacks |"
    )
    lines = [head, "|" + " --- |" * 11]
    for p in vllm.PROFILES:
        buffers = "; ".join(f"{d}: {', '.join(b)}" for d, b in p.buffer_devices)
        tp = "no"
        if p.prefill_tp_above_decode:
            tp = "if TP < heads" if p.replicated_at_equal_heads else "if TP <= heads"
        lines.append(
            f"| {p.label} | {buffers} | {p.default_buffer_device or 'device type'} "
            f"| `{p.lease.name}` ({p.lease.kind}) "
            f"| {p.handshake_compat_key or '-'} "
            f"| {'port + TP rank' if p.side_channel_per_tp_rank else 'port + DP index'} "
            f"| {tp} | {p.failure_policy_default or '-'} "
            f"| {p.cpu_reserved_per_rank} x TP | {_yes(p.nixl_pins_cpu)} "
            f"| {_yes(p.cpu_decode_repacks)} |"
        )
    return "\n".join(lines) + "\n"


def derivation_table() -> str:
    """The markdown tables in docs/derivation.md: derived values, vLLM profiles, then the
    UCX transports and their reach."""
    lines = ["| value | inputs | result | reason |", "| --- | --- | --- | --- |"]
    lines += [f"| {a} | {b} | `{c}` | {d} |" for a, b, c, d in derivation_rows()]
    return "\n".join(lines) + "\n\n" + profile_table() + "\n" + ucx.markdown_table()


if __name__ == "__main__":
    sys.stdout.write(derivation_table())
