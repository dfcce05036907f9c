"""Checks of a spec against what its engine accepts: the vLLM profile's buffer devices and
CPU pools, and args / env that would fight a value the operator derives.

Pure layer, called by :mod:`disagg_operator.validation`; every finding is a
:class:`~disagg_operator.problems.Problem` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Iterator

from disagg_operator.engines import vllm
from disagg_operator.models import ROLES, DeploymentSpec
from disagg_operator.problems import Problem
from disagg_operator.render import derive as render_derive
from disagg_operator.render import pods as render_pods
from disagg_worker import platforms

# Flags and env the operator derives → the spec field that sets them instead.
DERIVED_FLAGS = {
    "--port": "the serving port is fixed (8000, 8200 behind the routing sidecar)",
    "--kv-transfer-config": "spec.kvTransfer (kvConnectorExtraConfig for extra keys)",
    "--tensor-parallel-size": "spec.<role>.tensorParallelSize",
    "-tp": "spec.<role>.tensorParallelSize",
    "--model": "spec.model",
}
_TO = {
    vllm.SIDE_CHANNEL_HOST: "nothing: it is the pod IP",
    vllm.SIDE_CHANNEL_PORT: "spec.kvTransfer.sideChannelPort",
    vllm.ABORT_TIMEOUT: "spec.kvTransfer.blockLeaseSeconds",
    "UCX_TLS": "spec.kvTransfer.ucxTls",
    vllm.CPU_OMP_THREADS_BIND: "nothing: nobind keeps pods off each other's cores",
    render_derive.OMP_NUM_THREADS: "spec.<role>.resources (cpu)",
    vllm.CPU_RESERVED: "spec.<role>.resources (cpu)",
    vllm.CPU_KVCACHE_SPACE: "spec.<role>.resources.limits.memory",
}


def overrides(spec: DeploymentSpec) -> Iterator[Problem]:
    """Args and env that would fight a derived value: refused, naming the spec field."""
    for role in ROLES:
        r = spec.role(role)
        for i, arg in enumerate(r.args or []):
            flag = arg.split("=", 1)[0]
            if spec.engine.type == "vllm" and flag in DERIVED_FLAGS:
                use = DERIVED_FLAGS[flag].replace("<role>", role)
                yield Problem(f"spec.{role}.args[{i}]", f"{flag} is derived; set {use}")
        reference = (
            render_pods.reference_env_names(spec, role)
            if spec.engine.type == "reference"
            else frozenset()
        )
        for i, env in enumerate(r.env or []):
            target = _TO.get(env.name)
            if env.name in reference and target is None:
                target = "the spec field it comes from (docs/derivation.md)"
            if target is not None:
                target = target.replace("<role>", role)
                yield Problem(f"spec.{role}.env[{i}]", f"{env.name} is derived; set {target}")
    extra = spec.kv_transfer.kv_connector_extra_config or {}
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


def buffers(spec: DeploymentSpec, p: vllm.Profile) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        # vLLM's table is keyed by its device type: rocm pools run as "cuda" there.
        engine_device = platforms.get_platform(r.device).vllm_device
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
        buffer = render_derive.buffer_device(spec, role)
        if buffer not in allowed:
            where = "kvBufferDevice" if r.kv_buffer_device else "device"
            yield Problem(
                f"spec.{role}.{where}",
                f"kv_buffer_device {buffer!r} on device {r.device!r} is not supported by "
                f"vLLM {p.label} (it allows {', '.join(allowed) or 'none'}); use a newer "
                "vLLM image or set spec.engine.version (docs/derivation.md lists versions)",
            )
    if not render_derive.mixed_attention(spec):
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


def cpu_pools(spec: DeploymentSpec, p: vllm.Profile) -> Iterator[Problem]:
    for role in ROLES:
        r = spec.role(role)
        if r.device != "cpu":
            continue
        cpus, memory = render_derive.cpu_limits(r)
        need = render_derive.cpu_min_memory_gib(r.tensor_parallel_size)
        if cpus is None or memory is None:
            yield Problem(
                f"spec.{role}.resources",
                "a vLLM CPU pool needs limits.memory and a cpu limit or request; its KV "
                "cache size and thread count derive from them",
            )
        elif memory < need * 1024**3:
            yield Problem(
                f"spec.{role}.resources.limits.memory",
                f"{memory / 1024**3:.2g} GiB cannot hold vLLM's CPU runtime "
                f"(~{render_derive.CPU_RUNTIME_GIB} GiB per rank) and 1 GiB of KV cache; "
                f"set at least {need}Gi",
            )
