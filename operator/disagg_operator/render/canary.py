"""The decode pods' ``transfer-canary`` container (``disagg worker canary``): P/D requests
that prove a decode pod can pull KV from the prefill pool before it first turns Ready, and
keep reporting the path apart from readiness; and each prefill pod's wire peer, which the
canary reads with the engine's ``UCX_*`` env to name the transport UCX chose.

Render layer. Timings derive from ``kvTransfer.transferDeadlineSeconds`` (rows in
docs/derivation.md); the image is ``spec.transferCanary.image`` or the engine's
(:meth:`Engine.canary_image`); without one, decode pods get no canary and
TransferPathReady says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from disagg_contract.canary import WIRE_PEER_PORT, expect_wire_args
from disagg_operator.api import CANARY_PORT, HTTP_PORT, ROLES, DeploymentSpec
from disagg_operator.api.podtemplate import CANARY_CONTAINER
from disagg_operator.derive import model as model_source
from disagg_operator.derive import transfer
from disagg_operator.engines.base import protocol_args
from disagg_operator.engines.settings import Settings

NAME = CANARY_CONTAINER
PORT_NAME = "canary"  # the container port's name (Prometheus scrapes its /metrics by it)
# The canary's whole budget beyond the KV read's own deadline: a one-token prefill of a
# few-token prompt and a one-token decode, plus connection set-up on both hops.
MARGIN_S = 5
# The probe waits for a canary it starts (at most the budget + 1 s, see serve.canary).
PROBE_SLACK_S = 2
FAILURE_THRESHOLD = 2
FRESH_PERIODS = 3
RESOURCES: dict[str, Any] = {
    # the canary process: ~50 MB RSS measured (aiohttp, no torch), and its wire probe
    # process for a second now and then: ~80 MB (NIXL and UCX, no torch)
    "requests": {"cpu": "10m", "memory": "64Mi"},
    "limits": {"memory": "192Mi"},
}
WIRE_PEER = "wire-peer"  # the prefill pods' container that wire probes read from
WIRE_PEER_PORT_NAME = "wire-peer"
WIRE_PEER_RESOURCES: dict[str, Any] = {
    # NIXL and UCX with a 1 MiB buffer, no torch: ~55 MB RSS measured
    "requests": {"cpu": "10m", "memory": "64Mi"},
    "limits": {"memory": "128Mi"},
}


@dataclass(frozen=True)
class Timings:
    """Seconds: ``timeout`` bounds one canary (both hops), ``period`` is the probe's
    periodSeconds, ``interval`` the least time between two canaries, ``fresh`` how long
    a pass counts, ``probe_timeout`` the probe's timeoutSeconds."""

    timeout: int
    period: int
    interval: int
    fresh: int
    probe_timeout: int


def timings(spec: DeploymentSpec) -> Timings:
    """From the transfer deadline D: timeout T = ceil(D) + MARGIN_S; period = T (a probe
    never overlaps the canary it started); interval = period // 2, so every kubelet probe
    runs a canary and only extra probes reuse one; fresh = FRESH_PERIODS x period."""
    timeout = math.ceil(spec.kv_transfer.transfer_deadline_seconds) + MARGIN_S
    return Timings(
        timeout=timeout,
        period=timeout,
        interval=max(1, timeout // 2),
        fresh=FRESH_PERIODS * timeout,
        probe_timeout=timeout + PROBE_SLACK_S,
    )


def prefill_url(name: str, kv: str) -> str:
    """Where every canary of KV revision ``kv`` sends its prefill hop: the headless
    Service of that revision's prefill pods (its DNS name resolves to the Ready ones). Not
    the role Service: that one selects the routed revision, and a new revision's decode
    pods must prove their path to their own prefill pods before traffic moves to them."""
    return f"http://{revision_service(name, kv)}:{HTTP_PORT}"


def revision_service(name: str, kv: str) -> str:
    """The headless Service of KV revision ``kv``'s prefill pods (its canaries' and the
    router's)."""
    return f"{name}-p-{kv}"


def image(spec: DeploymentSpec, settings: Settings) -> str | None:
    """The canary's image, None when decode pods get no canary (disabled, or an engine
    whose images lack the ``disagg`` command with no image given)."""
    canary = spec.transfer_canary
    if not canary.enabled:
        return None
    if canary.image:
        return canary.image
    return settings.engine(spec).canary_image(spec, settings) or None


def container(
    spec: DeploymentSpec, name: str, decode_port: int, kv: str, settings: Settings
) -> dict[str, Any] | None:
    """The canary container of deployment ``name``'s decode pods of KV revision ``kv``;
    ``decode_port`` is the engine's port in the pod. None when :func:`image` is None."""
    chosen = image(spec, settings)
    if chosen is None:
        return None
    t = timings(spec)
    args = [
        *("--prefill", prefill_url(name, kv)),
        *("--decode", f"http://127.0.0.1:{decode_port}"),
        *("--model", model_source.source(spec).served_name, "--port", str(CANARY_PORT)),
        *("--timeout-s", str(t.timeout), "--interval-s", str(t.interval)),
        *("--fresh-s", str(t.fresh)),
    ]
    floor = transfer.bandwidth_floor(spec)
    if floor is not None:
        args += ["--min-bandwidth-gbps", f"{floor:g}"]
    engine = settings.engine(spec)
    for role in ROLES:  # data-parallel engines: the canary proves each one's side channel
        if engine.data_parallel_size(spec, role) > 1:
            args += [f"--{role}-ranks", str(engine.data_parallel_size(spec, role))]
    args += wire_args(spec, settings)
    args += protocol_args(engine)
    alive = {
        "httpGet": {"path": "/metrics", "port": CANARY_PORT},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }
    return {
        "name": NAME,
        "image": chosen,
        "command": ["disagg", "worker", "canary"],
        "args": args,
        "ports": [{"name": PORT_NAME, "containerPort": CANARY_PORT, "protocol": "TCP"}],
        "livenessProbe": alive,
        "resources": {k: dict(v) for k, v in RESOURCES.items()},
    }


def wire_args(spec: DeploymentSpec, settings: Settings) -> list[str]:
    """The canary's wire check flags: the peers' port and the wires expected; none where
    libfabric moves the KV (UCX is not on the path)."""
    expected = transfer.expected_wires(spec, settings.platforms)
    if not expected:
        return []
    return ["--wire-peer-port", str(WIRE_PEER_PORT), *expect_wire_args(expected)]


def wire_peer(spec: DeploymentSpec, settings: Settings) -> dict[str, Any] | None:
    """The prefill pods' wire peer container (the canary's image), None when decode pods
    get no canary or run no wire check."""
    chosen = image(spec, settings)
    if chosen is None or not wire_args(spec, settings):
        return None
    return {
        "name": WIRE_PEER,
        "image": chosen,
        "command": ["disagg", "worker", "wire", "peer"],
        # 0.0.0.0 spelled out: a local run puts the pod's own address there
        "args": ["--host", "0.0.0.0", "--port", str(WIRE_PEER_PORT)],
        "ports": [
            {"name": WIRE_PEER_PORT_NAME, "containerPort": WIRE_PEER_PORT, "protocol": "TCP"}
        ],
        "resources": {k: dict(v) for k, v in WIRE_PEER_RESOURCES.items()},
    }


def ucx_env(engine: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``UCX_*`` entries of the engine container's env: what the canary's wire probe and
    the wire peer run UCX with."""
    return [dict(e) for e in engine.get("env", []) if str(e.get("name", "")).startswith("UCX_")]


def engine_readiness(spec: DeploymentSpec) -> dict[str, Any]:
    """The decode engine container's readiness probe when the pod has a canary: the
    canary's ``GET /ready``, latched on the first canary that passes on the engine
    instance answering now. It is the engine container's, not the canary's: a kubelet
    turns a restarted container unready until its probe passes again, so an engine
    restart gates the pod until a canary passes on the new engine, however short the
    restart; a canary container's probe would need failureThreshold failures first."""
    t = timings(spec)
    return {
        "httpGet": {"path": "/ready", "port": CANARY_PORT},
        "periodSeconds": t.period,
        "timeoutSeconds": t.probe_timeout,
        "failureThreshold": FAILURE_THRESHOLD,
    }


def derivation_rows() -> list[tuple[str, str, str, str]]:
    """(value, inputs, result, reason) rows for docs/derivation.md."""
    timeout = f"ceil(D) + {MARGIN_S}"
    return [
        (
            "canary timeout (T)",
            "transferDeadlineSeconds D",
            timeout,
            "one canary, both hops: the KV read is bounded by D, the one-token prefill and "
            "decode and connection set-up by the margin",
        ),
        ("canary probe periodSeconds", "T", "T", "a probe never overlaps the canary it started"),
        (
            "canary probe timeoutSeconds",
            "T",
            f"T + {PROBE_SLACK_S}",
            "the probe waits for the canary it starts (at most T + 1 s)",
        ),
        (
            "canary probe failureThreshold",
            "any",
            str(FAILURE_THRESHOLD),
            "one failed canary is not enough; a path that breaks shows within 3 x T "
            f"(two probes T apart, each canary at most T; default D: {3 * (10 + MARGIN_S)} s)",
        ),
        (
            "canary --interval-s",
            "T",
            "T // 2",
            "every kubelet probe runs a canary; other probes in between reuse the result",
        ),
        (
            "canary --expect-wire",
            "the decode's UCX_TLS, an RDMA block (ucx)",
            "inter-node: rdma where RDMA is modelled, else tcp; intra-node: shared-memory; "
            "libfabric: none",
            "the wire UCX chose for the canary's wire probe must be the one modelled: tcp "
            "where RDMA or shared memory was meant (a failed CUDA IPC or CMA falls back to it "
            "quietly) is UnexpectedTransport",
        ),
        (
            "canary --fresh-s",
            "T",
            f"{FRESH_PERIODS} x T",
            "a pass older than this no longer counts (canaries stopped running)",
        ),
    ]
