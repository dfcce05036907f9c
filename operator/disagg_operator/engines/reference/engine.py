"""The reference engine: ``disagg worker serve`` with the worker's own contract as env.

The container's env is ``WorkerConfig(...).to_env()`` (the worker's contract model,
imported, never restated), plus the pod's name and IP from the downward API
(DISAGG_ENGINE_ID, DISAGG_ADVERTISE_HOST) and UCX_TLS. The handshake Secret is mounted
read-only; its pods run as the worker image's non-root user; the preStop asks the worker to
drain (``disagg worker drain``), which knows when its transfers are done.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from disagg_contract.config import WorkerConfig
from disagg_contract.presets import PRESETS, tp_problem
from disagg_operator.api import (
    HMAC_DIR,
    HMAC_PATH,
    HTTP_PORT,
    METRICS_PORT,
    ROLES,
    DeploymentSpec,
)
from disagg_operator.api.problems import Problem
from disagg_operator.api.rules import Rule
from disagg_operator.contracts import lws
from disagg_operator.contracts.prometheus import AlertSeries
from disagg_operator.derive import tracing, transfer
from disagg_operator.engines.base import (
    Container,
    DemandSeries,
    Engine,
)

if TYPE_CHECKING:
    from disagg_operator.engines.settings import Settings

NAME = "reference"
# Devices the reference engine (torch, in the worker) runs on.
DEVICES = ("cpu", "cuda")
HANDSHAKE_VOLUME = "handshake"
TMP_VOLUME, TMP_SIZE = "tmp", "64Mi"  # the writable /tmp under a read-only root
# The worker images' user (Dockerfile: USER 65532:65532).
WORKER_UID = 65532
# TP sizes that split every preset's heads (the worker's rank split, transfer.ranks)
TP_SIZES = [t for t in range(1, 65) if all(tp_problem(p, t) is None for p in PRESETS.values())]
_SIZES = ", ".join(map(str, TP_SIZES))
TP_RULE = Rule(
    f"self.engine.type != 'reference' || (self.prefill.tensorParallelSize in [{_SIZES}] && "
    f"self.decode.tensorParallelSize in [{_SIZES}])",
    f"spec.prefill/decode.tensorParallelSize: the reference engine splits its presets over "
    f"{_SIZES} ranks; set it to one of them",
)
# Env that changes the KV blocks (WorkerConfig fields, by env name).
KV_ENV = tuple(WorkerConfig.env_name(f) for f in ("block_size", "seed", "model"))
# The worker's series the alerts read: its requests waiting and decodes it computed
# (disagg_worker.serve.api.WorkerMetrics), its failed KV reads (transfer.telemetry).
REQUESTS_WAITING = "disagg_requests_waiting"
DECODE_RECOMPUTED = "disagg_decode_recomputed_total"
TRANSFER_FAILURES = "disagg_kv_transfer_failures_total"
STARTUP_S, STARTUP_PERIOD_S = 120, 2  # a seeded model in memory: seconds, not minutes


def worker_config(
    spec: DeploymentSpec, role: str, settings: Settings, port: int = HTTP_PORT
) -> WorkerConfig:
    """The WorkerConfig of ``role`` (pod-specific fields left unset)."""
    return WorkerConfig(**_worker_fields(spec, role, port, settings))


# The WorkerConfig fields render fills from the spec.
_FIELDS = (
    "role",
    "device",
    "peer_device",
    "kv_buffer_device",
    "backends",
    "side_channel_host",
    "side_channel_port",
    "http_host",
    "http_port",
    "metrics_port",
    "transfer_deadline_s",
    "block_lease_s",
    "hmac_secret_path",
    "tp_size",
    "model",
    "transfer_mode",
)
# spec.kvTransfer.mode → the worker's transfer_mode (decode's: READ, or the prefill's push);
# both pools get it (a prefill ignores it), rendered only when it is not the default (read).
TRANSFER_MODES = {"pull": "read", "push": "push"}


def _worker_fields(
    spec: DeploymentSpec, role: str, port: int, settings: Settings
) -> dict[str, Any]:
    r, kv = spec.role(role), spec.kv_transfer
    fields: dict[str, Any] = {
        "role": "prefill" if role == "prefill" else "decode",
        "device": r.device,
        "peer_device": spec.peer(role).device,
        "kv_buffer_device": transfer.buffer_device(spec, role, settings.platforms),
        "backends": list(kv.backends),
        "side_channel_host": "0.0.0.0",
        "side_channel_port": kv.side_channel_port,
        "http_host": "0.0.0.0",
        "http_port": port,
        "metrics_port": METRICS_PORT,
        "transfer_deadline_s": kv.transfer_deadline_seconds,
        "block_lease_s": kv.block_lease_seconds,
        "hmac_secret_path": HMAC_PATH,
        "tp_size": r.tensor_parallel_size,
        "model": spec.model,
        "transfer_mode": TRANSFER_MODES[kv.mode],
    }
    assert tuple(fields) == _FIELDS  # derived_env refuses exactly these
    return fields


def _env_names() -> frozenset[str]:
    """Env names render sets, whatever their values: the WorkerConfig fields it fills."""
    fields = {*_FIELDS, "engine_id", "advertise_host", *_GROUP_FIELDS}
    return frozenset({*(WorkerConfig.env_name(f) for f in fields), "UCX_TLS"})


def _tp_problems(spec: DeploymentSpec, role: str) -> Iterator[Problem]:
    """A role's TP size must split its preset's heads, on cpu. Prefill and decode sizes
    need not match: each decode rank reads its KV heads from the prefill ranks holding
    them (docs/worker.md)."""
    r, field = spec.role(role), f"spec.{role}.tensorParallelSize"
    preset = PRESETS.get(spec.model)
    if r.tensor_parallel_size == 1 or preset is None:
        return
    problem = tp_problem(preset, r.tensor_parallel_size)
    if problem is not None:
        yield Problem(field, f"model {spec.model!r}: {problem}; use one of {_SIZES}")
    if r.device != "cpu":
        yield Problem(
            field,
            f"the reference engine runs tensor-parallel ranks on cpu only, not {r.device!r}; "
            "set 1 or device cpu",
        )


# An instance across the pods of a LeaderWorkerSet group: the worker reads its place from
# the env LWS gives every container (Kubernetes expands $(VAR) from earlier env entries).
_GROUP_FIELDS = ("nodes", "node_rank", "leader_address")


def group_env(spec: DeploymentSpec, role: str) -> list[dict[str, Any]]:
    """``DISAGG_NODES``, ``DISAGG_NODE_RANK`` and ``DISAGG_LEADER_ADDRESS`` of a role whose
    instances span pods (none otherwise): the first pod runs rank 0 and serves, the others
    run their share of the ranks (disagg_worker.serve.members)."""
    nodes = spec.role(role).nodes_per_instance
    if nodes == 1:
        return []
    values = (str(nodes), f"$({lws.ENV_WORKER_INDEX})", f"$({lws.ENV_LEADER_ADDRESS})")
    return [
        {"name": WorkerConfig.env_name(f), "value": v}
        for f, v in zip(_GROUP_FIELDS, values, strict=True)
    ]


def _field_ref(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


class Reference(Engine):
    name = NAME
    summary = (
        "the built-in worker engine (`disagg worker serve`; cpu or cuda; tensor-parallel on "
        "cpu, any prefill/decode pair of TP sizes)"
    )
    cel_rules = (TP_RULE,)
    kv_env = KV_ENV
    # the worker's own metrics (disagg_worker.serve.api.WorkerMetrics)
    demand = DemandSeries(
        prompt_tokens="disagg_prompt_tokens_total",
        output_tokens="disagg_generation_tokens_total",
        requests="disagg_requests_total",
        running="disagg_requests_running",
        waiting=REQUESTS_WAITING,
    )

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        config = worker_config(spec, role, settings, port)
        env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in config.to_env().items()]
        env.append(_field_ref(WorkerConfig.env_name("engine_id"), "metadata.name"))
        env.append(_field_ref(WorkerConfig.env_name("advertise_host"), "status.podIP"))
        env.append({"name": "UCX_TLS", "value": transfer.ucx_tls(spec, role, settings.platforms)})
        env += group_env(spec, role)
        env += [{"name": k, "value": v} for k, v in tracing.env(spec).items()]
        mounts: list[dict[str, Any]] = [
            {"name": HANDSHAKE_VOLUME, "mountPath": HMAC_DIR, "readOnly": True},
            {"name": TMP_VOLUME, "mountPath": "/tmp"},
        ]
        budget = spec.role(role).startup_seconds or STARTUP_S
        startup = {
            "httpGet": {"path": "/health", "port": port},
            "periodSeconds": STARTUP_PERIOD_S,
            "failureThreshold": math.ceil(budget / STARTUP_PERIOD_S),
        }
        return Container(["disagg", "worker", "serve"], env, mounts, startup, read_only_root=True)

    def volumes(self, spec: DeploymentSpec, name: str, role: str) -> list[dict[str, Any]]:
        # Readable by the image's non-root user whatever its uid (no fsGroup assumed);
        # the key never leaves the pod's own filesystem view.
        secret = {"secretName": f"{name}-handshake", "defaultMode": 0o444}
        # the root filesystem is read-only: /tmp (the image's HOME) is the only place the
        # worker may write, and it writes nothing there itself
        tmp = {"sizeLimit": TMP_SIZE}
        return [{"name": HANDSHAKE_VOLUME, "secret": secret}, {"name": TMP_VOLUME, "emptyDir": tmp}]

    def alert_series(self, spec: DeploymentSpec) -> AlertSeries:
        """The worker's queue, its decode's count of requests sent without their
        ``kv_transfer_params`` (so computed there) and its failed KV reads."""
        return AlertSeries(REQUESTS_WAITING, DECODE_RECOMPUTED, TRANSFER_FAILURES)

    def metrics_port(self, spec: DeploymentSpec) -> int | None:
        """The worker's /metrics-only listener (``DISAGG_METRICS_PORT``)."""
        return METRICS_PORT

    def pod_security(self, spec: DeploymentSpec, role: str) -> dict[str, Any]:
        """Pod Security "restricted": the worker image's non-root user."""
        return {"runAsNonRoot": True, "runAsUser": WORKER_UID, "runAsGroup": WORKER_UID}

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        """ceil(transferDeadlineSeconds + blockLeaseSeconds): prefill holds a block set at
        most the lease, and a decode read started as the hold ends runs at most the
        deadline."""
        kv = spec.kv_transfer
        return math.ceil(kv.transfer_deadline_seconds + kv.block_lease_seconds)

    def drain_command(self, spec: DeploymentSpec, settle: int, seconds: int) -> list[str]:
        """After the settle, the worker says when it is idle (nothing held, used or
        waiting): at most ``seconds``, often much less."""
        return ["disagg", "worker", "drain", "--settle-s", str(settle), "--timeout-s", str(seconds)]

    def problems(self, spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
        if spec.model not in PRESETS:
            yield Problem(
                "spec.model",
                f"the reference engine has no model {spec.model!r}; use one of its presets: "
                f"{', '.join(sorted(PRESETS))} (or engine vllm for real models)",
            )
        for role in ROLES:
            r = spec.role(role)
            yield from _tp_problems(spec, role)
            if r.device not in DEVICES:
                yield Problem(
                    f"spec.{role}.device",
                    f"the reference engine runs on {', '.join(DEVICES)} only, not "
                    f"{r.device!r}; change the device or use engine vllm",
                )
        for field in ("servedModelName", "modelCache"):
            if spec.model_dump(by_alias=True).get(field) is not None:
                yield Problem(
                    f"spec.{field}",
                    "vllm only: the reference engine serves its preset by name; remove it",
                )

    def canary_image(self, spec: DeploymentSpec, settings: Settings) -> str | None:
        """The decode image: it has the ``disagg`` command."""
        return spec.image("decode")

    def derived_env(self, spec: DeploymentSpec, role: str) -> Mapping[str, str]:
        out = dict.fromkeys(_env_names(), "the spec field it comes from (docs/derivation.md)")
        out["UCX_TLS"] = "spec.kvTransfer.ucxTls"
        out[WorkerConfig.env_name("transfer_mode")] = (
            "spec.kvTransfer.mode (one mode for both pools: a pool's own would pair a push "
            "decode with a pull prefill)"
        )
        return out

    def multinode_problem(self, spec: DeploymentSpec, role: str) -> str | None:
        """The ranks spread over the group's pods (its tensor-parallel ranks on cpu)."""
        if spec.role(role).tensor_parallel_size < 2:
            return (
                "an instance of tensorParallelSize 1 has one rank, which one pod holds; "
                "raise tensorParallelSize or set 1"
            )
        return None

    def worker_args(self, spec: DeploymentSpec, role: str) -> list[str]:
        return []  # the same `disagg worker serve`: DISAGG_NODE_RANK says which part
