"""The vLLM engine: ``vllm serve <model>`` with NixlConnector, in the form the
deployment's vLLM version reads.

The container runs ``vllm serve`` with ``--kv-transfer-config`` JSON, the NIXL side-channel
env and, on CPU pools, the CPU engine's env (:mod:`.derive`); its pods carry the vLLM
version render assumed and the profile it used as annotations. vLLM's workers exchange
tensors through /dev/shm, so pods get a memory-backed one; a startup probe allows for the
model's download and load. vLLM has no endpoint that says its transfers are done, so a
terminating pod sleeps out the lease. vLLM images have no ``disagg`` command: the canary
takes the operator's ``--canary-image``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from disagg_operator.api import ROLES, DeploymentSpec
from disagg_operator.api.problems import Problem
from disagg_operator.api.rules import Rule
from disagg_operator.contracts.prometheus import AlertSeries
from disagg_operator.derive import model as model_source
from disagg_operator.derive import tracing, transfer
from disagg_operator.engines.base import (
    Container,
    DemandSeries,
    Engine,
)
from disagg_operator.engines.vllm import checks, cpu_tier, derive, engine_idle
from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.engines.vllm import fields as own
from disagg_operator.engines.vllm import kv_events as events
from disagg_operator.engines.vllm.checks import CPU_POOL_RULES

if TYPE_CHECKING:
    from disagg_operator.engines.settings import Settings

NAME = "vllm"
# Which vLLM version render assumed and the profile it used (unknown: no version found).
VERSION_NOTE = "disagg.dev/vllm-version"
PROFILE_NOTE = "disagg.dev/vllm-profile"
# Images that run vLLM as a non-root user, by repository name (any registry, any tag):
# the project's own (Dockerfile, target vllm-cpu: USER 65532, HOME /tmp).
NON_ROOT_IMAGES = {"disagg-vllm-cpu": 65532}
SHM_VOLUME = "dshm"
STARTUP_PERIOD_S = 10
ENGINE_IDLE_VOLUME = "engine-idle"


def engine_idle_name(name: str) -> str:
    """The ConfigMap holding deployment ``name``'s engine-idle shim."""
    return f"{name}-engine-idle"


# Flags whose value changes the KV a prefill writes or a decode expects.
KV_FLAGS = (
    "--dtype",
    "--kv-cache-dtype",
    "--block-size",
    "--attention-backend",
    "--quantization",
)
# Env that changes the KV layout or the attention backend (part of its handshake hash).
KV_ENV = ("VLLM_ATTENTION_BACKEND", "VLLM_KV_CACHE_LAYOUT")
# Prefill TP above decode TP: checked against the profile's rules when the KV heads are known.
TP_RULE = Rule(
    "self.engine.type != 'vllm' || "
    "self.prefill.tensorParallelSize <= self.decode.tensorParallelSize || "
    "(has(self.modelConfig) && has(self.modelConfig.numKeyValueHeads))",
    "spec.prefill.tensorParallelSize exceeds spec.decode.tensorParallelSize: lower prefill "
    "TP, raise decode TP, or set spec.modelConfig.numKeyValueHeads so the operator can "
    "check the pair against vLLM (>= 0.14 serves it when prefill KV is not replicated)",
)
# Pools of different devices, a cpu decode (the one such pair vLLM serves): vLLM's
# handshake hash is off, so the facts it compared are declared (checks.pair says which).
PAIR_RULE = Rule(
    "self.engine.type != 'vllm' || self.prefill.device == self.decode.device || "
    "self.decode.device != 'cpu' || (has(self.modelConfig) && "
    + " && ".join(f"has(self.modelConfig.{f})" for f in vllm.PAIR_FIELDS)
    + ")",
    "spec.modelConfig: pools of different devices need dtype, kvCacheDtype and blockSize, "
    "rendered on both pools (vLLM's handshake compatibility check is off for such pairs); "
    "set them, e.g. bfloat16, auto, 64",
)


class Vllm(Engine):
    name = NAME
    summary = "`vllm serve` with NixlConnector (real deployments)"
    cel_rules = (TP_RULE, PAIR_RULE, *CPU_POOL_RULES)
    kv_flags = KV_FLAGS
    kv_env = KV_ENV
    fields = own.FIELDS
    reasons = vllm.REASONS
    not_kv = own.NOT_KV
    derived_flags = checks.DERIVED_FLAGS
    # vLLM's own series (the contract's; checked against a running engine by
    # tests/vllm/test_pd.py, against vLLM's definitions by tests/vllm/test_metric_names.py)
    demand = DemandSeries(
        prompt_tokens=vllm.PROMPT_TOKENS,
        output_tokens=vllm.GENERATION_TOKENS,
        requests=vllm.REQUESTS_FINISHED,
        running=vllm.REQUESTS_RUNNING,
        waiting=vllm.REQUESTS_WAITING,
    )

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        nixl = derive.kv_transfer_config(spec, role, settings.platforms)
        config = cpu_tier.kv_transfer_config(spec, role, nixl)
        tp = str(spec.role(role).tensor_parallel_size)
        source = model_source.source(spec)
        command = [
            *("vllm", "serve", source.path),
            *(
                ("--served-model-name", source.served_name)
                if source.served_name != source.path
                else ()
            ),
            *("--port", str(port), "--tensor-parallel-size", tp),
            *("--kv-transfer-config", json.dumps(config, separators=(",", ":"))),
            *derive.pool_flags(spec),
            *events.flags(spec),
            *derive.multinode_flags(spec, role),
            *tracing_flags(spec),
        ]
        env: list[dict[str, Any]] = [
            {
                "name": vllm.SIDE_CHANNEL_HOST,
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {"name": vllm.SIDE_CHANNEL_PORT, "value": str(spec.kv_transfer.side_channel_port)},
            {"name": "UCX_TLS", "value": transfer.ucx_tls(spec, role, settings.platforms)},
        ]
        idle = derive.engine_idle(spec, role)
        derived = {
            **derive.lease_env(spec, role),
            **derive.cpu_engine_env(
                spec.role(role),
                derive.profile(spec),
                derive.weights_bytes(spec),
                derive.spin_free(idle),
            ),
        }
        env += [{"name": k, "value": v} for k, v in derived.items()]
        env += [{"name": k, "value": v} for k, v in tracing_env(spec, role).items()]
        env += [{"name": k, "value": v} for k, v in events.env(spec).items()]
        mounts: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
        if idle:
            env += [{"name": "PYTHONPATH", "value": vllm.ENGINE_IDLE_DIR}]
            env += [{"name": k, "value": v} for k, v in idle.items()]
            mounts.append(
                {"name": ENGINE_IDLE_VOLUME, "mountPath": vllm.ENGINE_IDLE_DIR, "readOnly": True}
            )
        budget = model_source.startup_seconds(spec, role, derive.weights_bytes(spec))
        startup = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": STARTUP_PERIOD_S}
        startup["failureThreshold"] = math.ceil(budget / STARTUP_PERIOD_S)
        return Container(command, env, mounts, startup)

    def alert_series(self, spec: DeploymentSpec) -> AlertSeries:
        """Its scheduler's queue and NixlConnector's series the version defines (failed
        transfers and the per-transfer histograms with the profile's NIXL series, the other
        counters from ``NIXL_COUNTERS_SINCE``); none for recomputed requests: vLLM counts
        none. From 0.31 a failed notification is counted as a failed transfer too."""
        found = derive.resolution(spec)
        nixl = found.profile.failed_transfers is not None
        notifications = vllm.nixl_counter(vllm.NIXL_FAILED_NOTIFICATIONS, found.version)
        twice = vllm.reaches(found.version, vllm.FAILURES_COUNT_NOTIFICATIONS_SINCE)
        return AlertSeries(
            waiting=vllm.REQUESTS_WAITING,
            transfer_failures=found.profile.failed_transfers,
            failed_notifications=notifications,
            expired_leases=vllm.nixl_counter(vllm.NIXL_KV_EXPIRED, found.version),
            notifications_after_expiry=vllm.nixl_counter(
                vllm.NIXL_NOTIFICATIONS_AFTER_EXPIRY, found.version
            ),
            failures_also_count=notifications if nixl and twice else None,
            transfer_bytes=f"{vllm.NIXL_BYTES}_sum" if nixl else None,
            transfer_descriptors=f"{vllm.NIXL_DESCRIPTORS}_sum" if nixl else None,
        )

    def pod_security(self, spec: DeploymentSpec, role: str) -> dict[str, Any]:
        """Pod Security "restricted" where the role's image runs as a non-root user we know
        of (:data:`NON_ROOT_IMAGES`: the project's own vLLM image, uid 65532, HOME /tmp);
        vLLM's own images run as root and write caches under /root, so theirs is left to
        the podTemplate (docs/security.md)."""
        uid = image_user(spec.image(role))
        if uid is None:
            return {}
        return {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid}

    def volumes(self, spec: DeploymentSpec, name: str, role: str) -> list[dict[str, Any]]:
        # vLLM's workers exchange tensors through /dev/shm; the container default is 64 MiB.
        out: list[dict[str, Any]] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}]
        if derive.engine_idle(spec, role):
            out.append({"name": ENGINE_IDLE_VOLUME, "configMap": {"name": engine_idle_name(name)}})
        return out

    def config_maps(self, spec: DeploymentSpec, name: str) -> dict[str, dict[str, str]]:
        """The engine-idle shim, when a pool runs it (:func:`derive.engine_idle`)."""
        if not any(derive.engine_idle(spec, role) for role in ROLES):
            return {}
        return {engine_idle_name(name): {engine_idle.FILE: engine_idle.SOURCE}}

    def side_channel_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        return derive.side_channel_ports(spec, role)

    def data_parallel_size(self, spec: DeploymentSpec, role: str) -> int:
        """``--data-parallel-size`` in the role's args (:func:`derive.data_parallel_size`)."""
        return derive.data_parallel_size(spec.role(role))

    def instance_ranks(self, spec: DeploymentSpec, role: str) -> int:
        """A rank per GPU: tensor-parallel ranks times the pipeline stages its args ask,
        for each of its data-parallel engines."""
        tp = spec.role(role).tensor_parallel_size
        return tp * derive.pipeline_stages(spec, role) * self.data_parallel_size(spec, role)

    def multinode_problem(self, spec: DeploymentSpec, role: str) -> str | None:
        """vLLM spans nodes without Ray from 0.11.1 (the contract's ``multinode``)."""
        if derive.profile(spec).multinode:
            return None
        return (
            "vLLM before 0.11.1 spans nodes only through Ray, which the operator does not "
            "run; use vLLM 0.11.1 or newer, or set 1"
        )

    def worker_args(self, spec: DeploymentSpec, role: str) -> list[str]:
        return [vllm.HEADLESS_FLAG]

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        """The lease as vLLM reads it (it has no per-transfer deadline setting)."""
        return transfer.lease_seconds(spec)

    def annotations(self, spec: DeploymentSpec) -> dict[str, str]:
        found = derive.resolution(spec)
        version = vllm.format_version(found.version) if found.version else "unknown"
        return {VERSION_NOTE: version, PROFILE_NOTE: found.profile.label}

    def problems(self, spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
        yield from checks.extra_config(spec)
        yield from checks.pool_flags(spec)
        yield from checks.pair(spec)
        yield from checks.problems(spec, settings.platforms)
        yield from checks.config_files(spec)
        yield from cpu_tier.problems(spec, settings.platforms)
        yield from events.problems(spec)

    def version_key(self, spec: DeploymentSpec) -> Any:
        """The resolved vLLM version (images of one version may differ); else the images."""
        found = derive.resolution(spec)
        if found.version is not None:
            return vllm.format_version(found.version)
        return super().version_key(spec)

    def version_condition(self, spec: DeploymentSpec) -> tuple[str, str, str]:
        found = derive.resolution(spec)
        return ("True" if found.known else "False", found.reason, found.message)

    def derived_env(self, spec: DeploymentSpec, role: str) -> Mapping[str, str]:
        if derive.engine_idle(spec, role):
            return {**checks.DERIVED_ENV, **checks.ENGINE_IDLE_ENV}
        return checks.DERIVED_ENV

    def kv_events_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        return events.ports(spec, role)

    def kv_events_router_args(self, spec: DeploymentSpec) -> list[str]:
        return events.router_args(spec)

    def prefix_cache_block(self, spec: DeploymentSpec) -> int | None:
        """vLLM keeps a prefix cache in units of its KV block (spec.modelConfig.blockSize,
        else the decode device's default) unless decode's args turn it off."""
        if vllm.NO_PREFIX_CACHE_FLAG in (spec.decode.args or []):
            return None
        block_size = own.model(spec).block_size
        if block_size is not None:
            return block_size
        return vllm.default_block_size(spec.decode.device, derive.resolution(spec).version)


def tracing_flags(spec: DeploymentSpec) -> list[str]:
    """``spec.tracing``: vLLM's own OTLP flags (read in vLLM 0.32's EngineArgs)."""
    t = spec.tracing
    if t is None:
        return []
    detail = [vllm.DETAILED_TRACES_FLAG, *t.vllm_detailed_traces] if t.vllm_detailed_traces else []
    return [vllm.OTLP_TRACES_FLAG, t.endpoint, *detail]


def tracing_env(spec: DeploymentSpec, role: str) -> dict[str, str]:
    """vLLM's exporter speaks OTLP/HTTP protobuf to the same URL; the SDK reads the
    sampler variables (vLLM's flag carries the endpoint, not the variable) and the
    service name (unset, vLLM's spans say ``unknown_service:python3``)."""
    if spec.tracing is None:
        return {}
    named = {vllm.SERVICE_NAME_ENV: f"vllm-{role}"}
    return {vllm.OTLP_PROTOCOL_ENV: vllm.OTLP_HTTP_PROTOBUF, **named, **tracing.sampler_env(spec)}


def image_user(image: str) -> int | None:
    """The uid ``image`` runs as when it is one of :data:`NON_ROOT_IMAGES`, else None."""
    name = image.split("@")[0].rsplit("/", 1)[-1].split(":")[0]
    return NON_ROOT_IMAGES.get(name)
