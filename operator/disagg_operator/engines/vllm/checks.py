"""What a vLLM deployment cannot run: the version's own problem, its tensor- and
data-parallel rules, buffer devices, CPU pools, failure policy and lease, and the
extra-config keys the operator derives; the flags and env it derives (refused in args /
env by validation).

Part of the vLLM engine (:meth:`.engine.Vllm.problems`); every finding is a
:class:`~disagg_operator.api.problems.Problem` naming the field and the fix.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from disagg_contract import platforms
from disagg_contract.platforms import Table
from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.api.rules import Rule
from disagg_operator.derive import transfer
from disagg_operator.derive.resources import cpu_limits
from disagg_operator.derive.scaling import effective_replicas
from disagg_operator.engines.base import flag_values
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import data_parallel, derive, event_rows, modes, tensor_parallel
from disagg_operator.engines.vllm import fields as own

# A vLLM CPU pool must say how much CPU and memory it has: threads and KV space derive from it.
_CPU_POOL = (
    "self.engine.type != 'vllm' || self.{role}.device != 'cpu' || ("
    "has(self.{role}.resources) && has(self.{role}.resources.limits) && "
    "'memory' in self.{role}.resources.limits && ("
    "'cpu' in self.{role}.resources.limits || "
    "(has(self.{role}.resources.requests) && 'cpu' in self.{role}.resources.requests)))"
)
CPU_POOL_RULES = tuple(
    Rule(
        _CPU_POOL.format(role=role),
        f"spec.{role}.resources: a vLLM CPU pool needs limits.memory and a cpu limit or "
        "request; its KV cache size and thread count derive from them",
    )
    for role in ROLES
)

# Flags and env the operator derives → the spec field that sets them instead.
DERIVED_FLAGS = {
    "--port": "the serving port is fixed (8000, 8200 behind the routing sidecar)",
    "--kv-transfer-config": "spec.kvTransfer (spec.kvTransfer.mode picks kv_connector for both "
    "pools, pull or push: a pool's own would pair a push pool with a pull one, which never "
    "transfers; kvConnectorExtraConfig for extra keys)",
    "--tensor-parallel-size": "spec.<role>.tensorParallelSize",
    "-tp": "spec.<role>.tensorParallelSize",
    "--model": "spec.model",
    "--served-model-name": "spec.servedModelName",
    **{f: "spec.<role>.nodesPerInstance" for f in vllm.MULTINODE_FLAGS},
    vllm.HEADLESS_FLAG: "spec.<role>.nodesPerInstance (a group's workers run headless)",
    **dict.fromkeys(vllm.KV_OFFLOADING_FLAGS, vllm.KV_OFFLOADING_USE),
}
DERIVED_ENV = {
    vllm.SIDE_CHANNEL_HOST: "nothing: it is the pod IP",
    vllm.SIDE_CHANNEL_PORT: "spec.kvTransfer.sideChannelPort",
    vllm.ABORT_TIMEOUT: "spec.kvTransfer.blockLeaseSeconds",
    "UCX_TLS": "spec.kvTransfer.ucxTls",
    vllm.CPU_OMP_THREADS_BIND: "nothing: nobind keeps pods off each other's cores",
    derive.OMP_NUM_THREADS: "spec.<role>.resources (cpu)",
    vllm.CPU_RESERVED: "spec.<role>.resources (cpu)",
    vllm.CPU_KVCACHE_SPACE: "spec.<role>.resources.limits.memory",
    vllm.NIXL_DELAY_ENV: "spec.kvTransfer.nixlProgressDelayMicroseconds",
    vllm.QUEUE_POLL_ENV: "spec.<role>.queuePollMicroseconds",
    vllm.AFFINITY_ENV: "spec.<role>.keepCpuAffinity",
}
# Derived on the pools that run the engine-idle shim (derive.engine_idle).
ENGINE_IDLE_ENV = {
    "PYTHONPATH": "spec.kvTransfer.nixlProgressDelayMicroseconds: 0, "
    "spec.<role>.queuePollMicroseconds: 0 and spec.<role>.keepCpuAffinity: false (the "
    "shim's folder is the engine's PYTHONPATH)",
}


def problems(spec: DeploymentSpec, table: Table) -> Iterator[Problem]:
    """What the deployment's vLLM version (its profile) can run."""
    found = derive.resolution(spec)
    if found.problem is not None:
        yield Problem(*found.problem)
    p = found.profile
    yield from tensor_parallel.problems(spec, p)
    yield from data_parallel.problems(spec, p)
    yield from transfer_mode(spec, derive.mode_row(spec))
    yield from kv_events(spec, found.version)
    yield from buffers(spec, p, table)
    yield from cpu_pools(spec, p)
    yield from host_buffers(spec, table)
    if own.kv_transfer(spec).kv_load_failure_policy and p.failure_policy_default is None:
        yield Problem(
            "spec.kvTransfer.kvLoadFailurePolicy",
            f"vLLM {p.label} has no kv_load_failure_policy; remove it or use vLLM >= "
            f"{vllm.first_version('failure_policy_default')}",
        )
    if p.lease.kind == "extra" and transfer.lease_seconds(spec) < p.lease.minimum:
        yield Problem(
            "spec.kvTransfer.blockLeaseSeconds",
            f"vLLM {p.label} heartbeats every lease // 6 s; set at least {p.lease.minimum}",
        )


def transfer_mode(spec: DeploymentSpec, row: modes.ModeRow) -> Iterator[Problem]:
    """spec.kvTransfer.mode against the version's row (:mod:`.modes`): its connector must
    exist, and pipeline stages run only where that connector transfers them."""
    mode, label = spec.kv_transfer.mode, f">={vllm.format_version(row.since)}"
    if mode not in row.modes:
        since = modes.first("modes", mode)
        yield Problem(
            "spec.kvTransfer.mode",
            f"{mode}: vLLM {label} has no {mode} connector ({modes.CONNECTORS[mode]} came in "
            f"vLLM {since}); set pull, or run vLLM >= {since} (image tag or "
            "spec.engine.version)",
        )
        return
    extra = own.kv_transfer(spec).kv_connector_extra_config or {}
    if row.mode_key is not None and row.mode_key in extra:
        yield Problem(
            f"spec.kvTransfer.kvConnectorExtraConfig.{row.mode_key}",
            f"vLLM {label}'s NixlConnector takes its transfer mode from this key, over the "
            "connector the operator renders; remove it and set spec.kvTransfer.mode",
        )
    for role in ROLES:
        found = _flag_at(spec.role(role).args, vllm.PIPELINE_PARALLEL_FLAGS)
        stages = derive.pipeline_stages(spec, role)
        if found is None or stages == 1:
            continue
        where = f"spec.{role}.args[{found}]"
        if role == "decode":
            yield Problem(
                where,
                f"{stages} pipeline stages on decode: vLLM's NIXL connector writes or reads "
                "a decode's KV as one stage (>= 0.26 refuses decode stages in either mode, "
                "older releases have no stages); give decode's ranks to "
                "spec.decode.tensorParallelSize instead",
            )
        elif mode not in row.prefill_stages:
            yield Problem(
                where,
                f"{stages} pipeline stages on prefill: vLLM {label}'s {mode} connector "
                f"transfers a prefill's KV as one stage; run vLLM >= "
                f"{modes.first('prefill_stages', mode)} (image tag or spec.engine.version), "
                "or give the ranks to spec.prefill.tensorParallelSize",
            )


def kv_events(spec: DeploymentSpec, version: vllm.Version | None) -> Iterator[Problem]:
    """spec.routing.prefixIndex events against the version's events row
    (:mod:`.event_rows`): every piece the router reads must be there."""
    if spec.routing.prefix_index != "events":
        return
    row = event_rows.events_row(version)
    lacks = row.missing() if row is not None else ["KV events this table read (none below 0.10.0)"]
    if not lacks or version is None:
        return
    yield Problem(
        "spec.routing.prefixIndex",
        f"events: vLLM {vllm.format_version(version)} lacks {'; '.join(lacks)}; set another "
        f"prefixIndex, or run vLLM >= {event_rows.first_working()} (image tag or "
        "spec.engine.version)",
    )


def _flag_at(args: list[str] | None, flags: tuple[str, ...]) -> int | None:
    """The index of the last arg in ``args`` that sets one of ``flags`` (None: none)."""
    found = [i for i, arg in enumerate(args or []) if arg.split("=", 1)[0] in flags]
    return found[-1] if found else None


def pool_flags(spec: DeploymentSpec) -> Iterator[Problem]:
    """--max-model-len, --block-size, --dtype, --kv-cache-dtype, --quantization: one value
    for both pools. From spec.modelConfig (then args may not set them), or the same in both
    pools' args."""
    for flag, value in derive.pool_values(spec).items():
        where = f"spec.modelConfig.{derive.POOL_FLAGS[flag]}"
        given = {r: flag_values(spec.role(r).args, (flag,)).get(flag) for r in ROLES}
        if value is not None:
            for role in ROLES:
                for i, arg in enumerate(spec.role(role).args or []):
                    if arg.split("=", 1)[0] == flag:
                        yield Problem(
                            f"spec.{role}.args[{i}]",
                            f"{flag} is derived from {where} for both pools; remove it",
                        )
        elif given["prefill"] != given["decode"]:
            shown = ", ".join(f"{r} {v or 'unset'}" for r, v in given.items())
            yield Problem(
                where,
                f"the pools' args set {flag} differently ({shown}): a pair needs one value "
                f"(a prefill that takes more than its decode fails late); set {where} "
                "and remove the flag from the args",
            )


def pair(spec: DeploymentSpec) -> Iterator[Problem]:
    """What vLLM's handshake hash would have compared, where the operator turns it off
    (pools of different devices): one dtype, KV-cache dtype and block size declared for
    both, a KV a CPU decode can repack, known and equal vLLM versions, one NIXL release."""
    if transfer.mixed_attention(spec) and spec.decode.device == "cpu":  # else refused: buffers
        devices = f"a {spec.prefill.device!r} prefill with a {spec.decode.device!r} decode"
        given = own.model(spec).model_dump(by_alias=True)
        for name in vllm.PAIR_FIELDS:
            if given[name] is None:
                yield Problem(
                    f"spec.modelConfig.{name}",
                    f"required for {devices}: vLLM's handshake compatibility check is off "
                    "for pools of different devices (their attention backends differ), so "
                    "the operator renders one value on both pools instead; set it (dtype "
                    "e.g. bfloat16, kvCacheDtype auto, blockSize e.g. 64)",
                )
        yield from _cpu_decode(spec)
        yield from _known_version(spec, devices)
    yield from _nixl_versions(spec)


def _cpu_decode(spec: DeploymentSpec) -> Iterator[Problem]:
    """A cpu decode of a pair of different devices (the one such pair vLLM serves)."""
    m = own.model(spec)
    if m.kv_cache_dtype is not None and m.kv_cache_dtype not in vllm.CPU_TRANSFER_KV_DTYPES:
        yield Problem(
            "spec.modelConfig.kvCacheDtype",
            f"{m.kv_cache_dtype!r}: a cpu decode repacks the KV it reads and refuses an fp8 "
            'one (vLLM: "FP8 KV cache is not yet supported with KV transfer on CPU"); '
            "set auto",
        )
    if m.block_size is not None and m.block_size % vllm.CPU_BLOCK_MULTIPLE:
        yield Problem(
            "spec.modelConfig.blockSize",
            f"{m.block_size}: vLLM's CPU attention takes a block size that is a multiple of "
            f"{vllm.CPU_BLOCK_MULTIPLE} tokens; set e.g. 64",
        )


def _known_version(spec: DeploymentSpec, devices: str) -> Iterator[Problem]:
    images = derive.role_images(spec)
    if spec.engine.version is not None or len({image for _, image in images}) == 1:
        return  # declared, or one image: one vLLM
    untagged = [field for field, image in images if vllm.image_version(image) is None]
    if untagged:
        yield Problem(
            "spec.engine.version",
            f"{devices} must run the same vLLM, and with its handshake check off nothing "
            f"compares the versions: {' and '.join(untagged)} has no version in its tag; "
            "use versioned image tags or set spec.engine.version",
        )


def _nixl_versions(spec: DeploymentSpec) -> Iterator[Problem]:
    given = {r: own.role(spec, r).nixl_version for r in ROLES}
    images = {spec.image(r) for r in ROLES}
    if not any(given.values()) and not (transfer.mixed_attention(spec) and len(images) > 1):
        return
    for role, version in given.items():
        if version is None:
            yield Problem(
                f"spec.{role}.nixlVersion",
                "required: the pools run different images and vLLM compares no NIXL "
                "version; name the release each image ships (pip show nixl in it)",
            )
    if None not in given.values() and given["prefill"] != given["decode"]:
        yield Problem(
            "spec.decode.nixlVersion",
            f"the pools run different NIXL releases (prefill {given['prefill']}, decode "
            f"{given['decode']}); build both images with one release",
        )


def extra_config(spec: DeploymentSpec) -> Iterator[Problem]:
    """kvConnectorExtraConfig keys the operator derives."""
    extra = own.kv_transfer(spec).kv_connector_extra_config or {}
    fields = {
        "backends": "spec.kvTransfer.backends",
        "kv_lease_duration": "spec.kvTransfer.blockLeaseSeconds",
        "enforce_handshake_compat": "nothing: it is false exactly when the devices differ",
    }
    for key in vllm.DERIVED_EXTRA_KEYS:
        if key in extra:
            yield Problem(
                f"spec.kvTransfer.kvConnectorExtraConfig.{key}",
                f"derived by the operator; remove it and set {fields[key]}",
            )


def buffers(spec: DeploymentSpec, p: vllm.Profile, table: Table) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        # vLLM's table is keyed by its device type: rocm pools run as "cuda" there.
        engine_device = platforms.get_platform(r.device, table).vllm_device
        allowed = p.supported_buffers(engine_device)
        if allowed is None and vllm.NEWEST.supported_buffers(engine_device) is None:
            continue  # out-of-tree platform: its own table (checked in _devices)
        if allowed is None:
            since = next(x for x in vllm.PROFILES if x.supported_buffers(engine_device) is not None)
            yield Problem(
                f"spec.{role}.device",
                f"vLLM {p.label} has no NixlConnector support for device {r.device!r}; use "
                f"vLLM >= {vllm.format_version(since.since)} or set spec.engine.version",
            )
            continue
        buffer = transfer.buffer_device(spec, role, table)
        if buffer not in allowed:
            where = "kvBufferDevice" if r.kv_buffer_device else "device"
            yield Problem(
                f"spec.{role}.{where}",
                f"kv_buffer_device {buffer!r} on device {r.device!r} is not supported by "
                f"vLLM {p.label} (it allows {', '.join(allowed) or 'none'}); use a newer "
                "vLLM image or set spec.engine.version (docs/derivation.md lists versions)",
            )
    if not transfer.mixed_attention(spec):
        return
    if spec.decode.device != "cpu":
        yield Problem(
            "spec.decode.device",
            f"prefill {spec.prefill.device!r} and decode {spec.decode.device!r} run different "
            "attention layouts and vLLM repacks a remote layout only on a CPU decode; use "
            "one device for both pools or a cpu decode",
        )
    elif not p.cpu_decode_repacks:
        yield Problem(
            "spec.engine",
            f"a cpu decode reading a {spec.prefill.device} prefill needs vLLM >= "
            f"{vllm.first_version('cpu_decode_repacks')} (CPU decode repacks the KV layout); "
            f"vLLM {p.label} cannot; use a newer image or set spec.engine.version",
        )


def host_buffers(spec: DeploymentSpec, table: Table) -> Iterator[Problem]:
    """A GPU pool with a cpu buffer holds a host copy of its device KV cache: refused when
    its size cannot be told, or its memory limit cannot hold it and the runtime."""
    gib = 1024**3
    for role in ROLES:
        r = spec.role(role)
        buffer = derive.host_buffer_bytes(spec, role, table)
        if buffer is None and effective_replicas(spec, role) > 0:
            label = platforms.get_platform(r.device, table).memory_label
            pin = f", or pin the pool to one GPU model with nodeSelector {label}" if label else ""
            yield Problem(
                f"spec.{role}.acceleratorMemory",
                f"required: kvBufferDevice cpu on device {r.device!r} makes vLLM keep a "
                "host copy of the whole device KV cache (tens of GiB on a large GPU), which "
                "the pod's memory must hold; set one device's memory (e.g. 80Gi), cap the "
                f"device KV cache with --kv-cache-memory-bytes{pin}",
            )
            continue
        memory = cpu_limits(r)[1]
        if not buffer or memory is None:  # none, none needed, or no limit to hold it
            continue
        if own.role(spec, role).kv_offload_memory is not None:
            continue  # cpu_tier's memory check counts this buffer with the tier
        runtime = derive.pod_ranks(r) * derive.CPU_RUNTIME_GIB * gib
        if memory < buffer + runtime:
            need = math.ceil((buffer + runtime) / gib)
            yield Problem(
                f"spec.{role}.resources.limits.memory",
                f"{memory / gib:.3g} GiB cannot hold vLLM's host KV buffer (kvBufferDevice "
                f"cpu mirrors the device KV cache: {buffer / gib:.3g} GiB for "
                f"{derive.pod_ranks(r)} rank(s), from the device memory, "
                "--gpu-memory-utilization and the weights, or --kv-cache-memory-bytes) and "
                f"the runtime (~{derive.CPU_RUNTIME_GIB} GiB per rank); set at least "
                f"{need}Gi, or cap the device KV cache with --kv-cache-memory-bytes",
            )


def config_files(spec: DeploymentSpec) -> Iterator[Problem]:
    """``--config FILE`` in a pool's args: refused. The file is inside the container, where
    the operator cannot read it, and vLLM takes from it every flag the command line does
    not set (contract.CONFIG_FLAG), so what it holds escapes every check here."""
    for role in ROLES:
        for i, arg in enumerate(spec.role(role).args or []):
            if arg.split("=", 1)[0] == vllm.CONFIG_FLAG:
                yield Problem(
                    f"spec.{role}.args[{i}]",
                    f"{vllm.CONFIG_FLAG} names a file in the container that the operator "
                    "cannot read, and vLLM takes every flag the command does not set from "
                    "it unchecked (kv-offloading-size there replaces the P/D connector, "
                    "data-parallel-size multiplies the engines); write its flags in "
                    f"spec.{role}.args instead",
                )


def cpu_pools(spec: DeploymentSpec, p: vllm.Profile) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        if r.device != "cpu":
            continue
        cpus, memory = cpu_limits(r)
        weights = derive.pod_weights(r, derive.weights_bytes(spec))
        need = derive.cpu_min_memory_gib(derive.pod_ranks(r), weights)
        if cpus is None or memory is None:
            yield CPU_POOL_RULES[ROLES.index(role)].problem()
        elif memory < need * 1024**3:
            held = (
                f"the weights ({weights / 1024**3:.3g} GiB, spec.modelConfig.weightsMemory), "
                if weights
                else ""
            )
            yield Problem(
                f"spec.{role}.resources.limits.memory",
                f"{memory / 1024**3:.3g} GiB cannot hold vLLM's CPU runtime "
                f"(~{derive.CPU_RUNTIME_GIB} GiB per rank), {held}and 1 GiB of KV cache per "
                f"rank; set at least {need}Gi",
            )
