"""WorkerConfig: the operator↔worker contract.

The operator renders exactly this model into pod env (``DISAGG_*``, see
:meth:`WorkerConfig.to_env`); the worker reads it back with :meth:`WorkerConfig.from_env`.
Neither side re-declares a field. Invalid combinations fail here, at start, with a message
naming the field and the allowed values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from disagg_contract import platforms

ENV_PREFIX = "DISAGG_"
# Read beside the settings, by another part of the worker: the local kubelet's name table
# (serve.names), which stands for cluster DNS when pods run as processes on one host.

Role = Literal["prefill", "decode", "both"]


class ConfigError(ValueError):
    """A worker setting is invalid; the message names the field (env var) and the fix."""


class WorkerConfig(BaseModel):
    """Everything one worker process needs; every field maps to ``DISAGG_<FIELD>``."""

    model_config = ConfigDict(extra="forbid", frozen=True, protected_namespaces=())

    role: Role = Field(description="prefill serves KV, decode pulls it, both runs one process")
    engine_id: str = Field(default="", description="unique id of this instance (pod name)")
    device: str = Field(default="cpu", description="accelerator of this pod: cpu, cuda, ...")
    peer_device: str | None = Field(
        default=None, description="device of the other role; used to derive kv_buffer_device"
    )
    kv_buffer_device: str | None = Field(
        default=None, description="where the registered KV buffer lives; derived when unset"
    )
    backends: list[str] = Field(default_factory=lambda: ["UCX"], description="NIXL backends")
    side_channel_host: str = Field(default="127.0.0.1", description="handshake listen address")
    side_channel_port: int = Field(default=5600, ge=0, le=65535, description="0: any free port")
    advertise_host: str | None = Field(
        default=None, description="host peers use to reach this pod (pod IP); default: listen"
    )
    http_host: str = Field(default="127.0.0.1")
    http_port: int = Field(default=8000, ge=0, le=65535, description="0: any free port")
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="a second listener serving GET /metrics only, for Prometheus (0: none; "
        "/metrics stays on the HTTP port too)",
    )
    transfer_deadline_s: float = Field(default=10.0, gt=0, description="max time per transfer")
    transfer_mode: Literal["read", "push"] = Field(
        default="read",
        description="decode's: read (decode READs prefill's blocks) or push (prefill WRITEs "
        "them on decode's claim: zero-copy over UCX tcp, where a READ is emulated); a "
        "prefill that cannot push is read from",
    )
    block_lease_s: float = Field(default=30.0, gt=0, description="prefill holds blocks this long")
    prefill_pace_tokens_per_s: float = Field(
        default=0.0,
        ge=0,
        description="reference engine, prefill role: a prefill for a decode takes at least its "
        "prompt's tokens / this many seconds, the engine busy throughout (0: its compute "
        "alone). It stands for an accelerator pod's own pace where pods share one host's "
        "cores (disagg bench autoscale --live --paced)",
    )
    max_queued: int = Field(
        default=64, ge=0, description="requests that may wait for free KV blocks; more get 503"
    )
    queue_timeout_s: float = Field(
        default=20.0, gt=0, description="a request waits this long for KV blocks, then 503"
    )
    nixl_threads: int = Field(default=0, ge=0, description="NIXL backend worker threads")
    ucx_tls: str | None = Field(default=None, description="UCX_TLS override")
    ucx_env: dict[str, str] = Field(default_factory=dict, description="extra UCX_* settings")
    hmac_secret_path: str | None = Field(
        default=None, description="file holding the shared handshake secret"
    )
    tp_size: int = Field(default=1, ge=1)
    tp_rank: int = Field(default=0, ge=0)
    nodes: int = Field(
        default=1, ge=1, description="pods one engine's ranks span (a LeaderWorkerSet group)"
    )
    node_rank: int = Field(
        default=0, ge=0, description="this pod's place in its group: 0 serves (rank 0 is here)"
    )
    leader_address: str = Field(
        default="", description="where the group's first pod listens (its ranks' rendezvous)"
    )
    group_port: int = Field(
        default=29400,
        ge=1,
        le=65000,
        description="the group's rendezvous on the first pod: the gloo store on it, rank 0's "
        "answers on +1, its commands to rank r on +1+r",
    )
    model: str = Field(default="tiny", description="reference engine preset name")
    seed: int = Field(default=0, description="reference engine weight seed")
    block_size: int = Field(default=16, gt=0, description="tokens per KV block")
    num_blocks: int = Field(default=512, gt=0, description="KV blocks in this worker's cache")
    log_level: Literal["debug", "info", "warning", "error"] = "warning"

    @field_validator("backends", mode="before")
    @classmethod
    def _split_backends(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [b.strip() for b in value.split(",") if b.strip()]
        return value

    @field_validator("ucx_env")
    @classmethod
    def _ucx_names_only(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key.startswith("UCX_"):
                raise ValueError(f"key {key!r} is not a UCX setting; use UCX_* names only")
        return value

    @model_validator(mode="after")
    def _check(self) -> WorkerConfig:
        try:
            platforms.get_platform(self.device)
        except ValueError as e:
            raise ValueError(f"DISAGG_DEVICE: {e}") from None
        if self.peer_device is not None:
            try:
                platforms.get_platform(self.peer_device)
            except ValueError as e:
                raise ValueError(f"DISAGG_PEER_DEVICE: {e}") from None
        try:
            platforms.check_buffer_device(self.device, self.buffer_device)
        except ValueError as e:
            raise ValueError(f"DISAGG_KV_BUFFER_DEVICE: {e}") from None
        try:
            platforms.check_backends(self.backends, self.buffer_device, self.device)
        except ValueError as e:
            raise ValueError(f"DISAGG_BACKENDS: {e}") from None
        if self.block_lease_s <= self.transfer_deadline_s:
            raise ValueError(
                f"DISAGG_BLOCK_LEASE_S: {self.block_lease_s:g} must exceed "
                f"DISAGG_TRANSFER_DEADLINE_S {self.transfer_deadline_s:g}, or prefill frees "
                "blocks a decode may still be reading; raise the lease"
            )
        if self.tp_rank >= self.tp_size:
            raise ValueError(
                f"DISAGG_TP_RANK: {self.tp_rank} must be below DISAGG_TP_SIZE {self.tp_size}"
            )
        if self.tp_size % self.nodes:
            raise ValueError(
                f"DISAGG_NODES: {self.tp_size} ranks (DISAGG_TP_SIZE) do not split evenly "
                f"over {self.nodes} pods; use a node count that divides them"
            )
        if self.node_rank >= self.nodes:
            raise ValueError(
                f"DISAGG_NODE_RANK: {self.node_rank} must be below DISAGG_NODES {self.nodes}"
            )
        if self.node_rank > 0 and not self.leader_address:
            raise ValueError(
                "DISAGG_LEADER_ADDRESS is required on a group's other pods (DISAGG_NODE_RANK "
                f"{self.node_rank}): the address of the pod whose ranks they join"
            )
        return self

    @property
    def rank_address(self) -> str:
        """Where this pod's ranks meet the engine's others: loopback within one pod, the
        pod's own address where the ranks span a group's pods."""
        return "127.0.0.1" if self.nodes == 1 else self.advertised_host

    @property
    def ranks_here(self) -> range:
        """The tensor-parallel ranks this pod runs: its share of the group's."""
        per = self.tp_size // self.nodes
        return range(self.node_rank * per, (self.node_rank + 1) * per)

    @property
    def buffer_device(self) -> str:
        """kv_buffer_device, derived from device and peer device when unset."""
        if self.kv_buffer_device is not None:
            return self.kv_buffer_device
        return platforms.derive_buffer_device(self.device, self.peer_device)

    @property
    def needs_staging(self) -> bool:
        """True when the cache lives on the device but NIXL moves a host copy."""
        return self.device != "cpu" and self.buffer_device == "cpu"

    @property
    def memory_type(self) -> str:
        return platforms.memory_type(self.buffer_device)

    @property
    def advertised_host(self) -> str:
        return self.advertise_host or self.side_channel_host

    # --- env mapping -------------------------------------------------------------------

    @classmethod
    def env_name(cls, field: str) -> str:
        return ENV_PREFIX + field.upper()

    def to_env(self) -> dict[str, str]:
        """``DISAGG_*`` env for every field that differs from its default (plus role)."""
        data = self.model_dump(exclude_defaults=True)
        data["role"] = self.role
        return {self.env_name(k): _encode(v) for k, v in sorted(data.items())}

    @classmethod
    def from_env(
        cls, env: Mapping[str, str], overrides: Mapping[str, Any] | None = None
    ) -> WorkerConfig:
        """Build from ``DISAGG_*`` variables, then ``overrides`` (e.g. CLI flags) on top.

        Unknown ``DISAGG_*`` variables are refused, so a typo does not pass silently.
        """
        raw: dict[str, Any] = {}
        known = {cls.env_name(f): f for f in cls.model_fields}
        for key, value in env.items():
            if not key.startswith(ENV_PREFIX):
                continue
            field = known.get(key)
            if field is None:
                raise ConfigError(f"{key}: unknown setting; known: {', '.join(sorted(known))}")
            raw[field] = _decode(value)
        raw.update({k: v for k, v in (overrides or {}).items() if v is not None})
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            raise ConfigError(_explain(e)) from None


def _encode(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return json.dumps(value)


def _decode(value: str) -> Any:
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


def _explain(err: ValidationError) -> str:
    parts = []
    for item in err.errors():
        loc = ".".join(str(p) for p in item["loc"])
        name = WorkerConfig.env_name(loc) if loc else ""
        msg = str(item["msg"]).removeprefix("Value error, ")
        parts.append(f"{name}: {msg}" if name else msg)
    return "; ".join(parts)
