"""A pod of the API as processes on this host, each pod at its own address.

Each pod gets an address of its own on the loopback network (the node's 127.0.N.0/24), so every
container listens on the ports it was rendered with, as in a pod; what a pod's containers
share (the pod's network namespace) becomes that address: ``127.0.0.1``, ``localhost`` and
``0.0.0.0`` in their arguments and env are the pod's address, and a ``disagg`` command that
takes ``--host`` gets it. The engine container is its engine's local-run module's to adapt
(``LocalEngine.process`` of :mod:`disagg_tools.local.engines`, with the pod's ``address``);
other containers must run ``disagg`` (the canary, the router). Env, command and args are
the kubelet's (:mod:`disagg_tools.local.rules.env`: references, ``$(VAR)``); Secret,
ConfigMap and emptyDir
volumes are folders the caller wrote (``folders``: volume name → folder), and their mount
paths in arguments and env become those folders. Cluster DNS is the kubelet's name table:
``DISAGG_HOSTS_FILE`` (:mod:`disagg_worker.serve.names`). The cluster-only ``UCX_TLS`` is
dropped, as ``disagg up`` does (UCX picks shared memory and CMA on one host).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from disagg_operator.api.podtemplate import ENGINE_CONTAINER
from disagg_tools.local.engines import LocalEngine
from disagg_tools.local.engines.base import disagg_argv
from disagg_tools.local.kubelet.rules import probes
from disagg_tools.local.rules import env as kubelet_env
from disagg_tools.local.rules.pods import NODE, UpError, without_cluster_only

# Cluster DNS on one host: the kubelet's table, answered by a shim first on each process's
# PYTHONPATH (kubelet/dns/sitecustomize.py; the product resolves names the cluster's way)
HOSTS_ENV = "LOCAL_KUBELET_HOSTS_FILE"
DNS_SHIM = str(resources.files("disagg_tools.local.kubelet").joinpath("dns"))
LOOPBACK = re.compile(r"(?<![\w.])(127\.0\.0\.1|localhost|0\.0\.0\.0)(?![\w.])")
TAKES_HOST = (["worker", "canary"], ["proxy"])  # `disagg` commands with a listen --host


@dataclass(frozen=True)
class Process:
    """One container as a process: its command, env, and the container spec (probes)."""

    container: str
    argv: list[str]
    env: dict[str, str]
    spec: Mapping[str, Any]
    pre_stop: list[str] = field(default_factory=list)  # the preStop exec, adapted
    port: int = 0  # the engine's HTTP port (0: not the engine)


@dataclass(frozen=True)
class PodRun:
    """A pod as processes at ``address``."""

    name: str
    namespace: str
    address: str
    processes: list[Process]
    grace_s: float
    notes: list[str] = field(default_factory=list)


def pod_run(
    pod: Mapping[str, Any],
    address: str,
    engine: LocalEngine | None,
    *,
    secret_path: str,
    folders: Mapping[str, str],
    hosts_file: str,
    data: kubelet_env.Data,
) -> PodRun:
    """``pod`` (an API object) as processes at ``address``; ``engine``: the engine of a
    prefill or decode pod (None for others, e.g. the router's). Raises UpError naming
    what cannot run here. ``data``: the ConfigMaps and Secrets the containers' env reads."""
    meta, spec = pod["metadata"], pod["spec"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    if spec.get("initContainers"):
        names = ", ".join(c["name"] for c in spec["initContainers"])
        raise UpError(f"pod {name} has init container(s) {names}; the local kubelet runs none")
    mounts = _mounts(pod, folders)
    processes, notes = [], []
    for container in spec.get("containers", []):
        _probes(name, container)
        at = f"pod {name} container {container['name']}"
        fields = kubelet_env.PodFields(pod, address, address, NODE)
        try:
            env = kubelet_env.container_env(at, container, fields, data)
        except kubelet_env.EnvError as e:
            raise UpError(str(e)) from None
        command = kubelet_env.container_command(container, env)
        env, dropped = without_cluster_only(env)
        env = {k: _local(v, address, mounts) for k, v in env.items()}
        env[HOSTS_ENV] = hosts_file
        notes += [f"{container['name']}: dropped cluster-only {d}" for d in dropped]
        port = 0
        if container["name"] == ENGINE_CONTAINER and engine is not None:
            command = [_local(a, address, mounts) for a in command]
            try:
                done = engine.process(
                    name, command, env, secret_path=secret_path, address=address,
                )  # fmt: skip
            except (NotImplementedError, ValueError) as e:
                raise UpError(str(e)) from None
            argv, env, port = done.argv, done.env, done.http_port
        else:
            argv = _disagg(name, container["name"], command, address, mounts)
        env = with_dns(env)
        hook = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
        pre_stop = (
            _disagg(name, container["name"], hook["command"], address, mounts) if hook else []
        )
        processes.append(Process(container["name"], argv, env, container, pre_stop, port))
    grace = float(spec.get("terminationGracePeriodSeconds", 30))
    return PodRun(name, namespace, address, processes, grace, notes)


def with_dns(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the DNS shim's folder first on PYTHONPATH."""
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": DNS_SHIM + (os.pathsep + rest if rest else "")}


def _probes(pod: str, container: Mapping[str, Any]) -> None:
    """Refuse a probe the API server would have refused (the emulator does not check)."""
    for kind in probes.KINDS:
        if container.get(kind) is not None:
            where = f"pod {pod}, container {container['name']}"
            try:
                probes.Rule.of(kind, container[kind])
            except ValueError as e:
                raise UpError(f"{where}: {e}") from None
            for action in ("httpGet", "tcpSocket"):
                if action in container[kind]:
                    probe_port(container, container[kind][action].get("port"))
            if "grpc" in container[kind]:
                raise UpError(
                    f"{where}: {kind}.grpc: the local kubelet runs httpGet, tcpSocket and exec "
                    "probes only"
                )


def _disagg(
    pod: str, container: str, command: Sequence[str], address: str, mounts: Mapping[str, str]
) -> list[str]:
    if not command or command[0] != "disagg":
        shown = " ".join(command[:2]) or "its image's entrypoint"
        raise UpError(
            f"pod {pod}, container {container}: runs {shown!r}; the local kubelet runs the "
            "engine and `disagg` commands only"
        )
    args = [_local(a, address, mounts) for a in command[1:]]
    listens = any(args[: len(words)] == words for words in TAKES_HOST)
    if listens and not any(a == "--host" or a.startswith("--host=") for a in args):
        args += ["--host", address]
    return disagg_argv(args)


def _local(value: str, address: str, mounts: Mapping[str, str]) -> str:
    value = LOOPBACK.sub(address, value)
    for at, folder in mounts.items():
        if value == at or value.startswith(at + "/"):
            return folder + value[len(at) :]
    return value


def _mounts(pod: Mapping[str, Any], folders: Mapping[str, str]) -> dict[str, str]:
    """Mount path → local folder for every container's mounts (the caller wrote the
    folders of Secret, ConfigMap and emptyDir volumes)."""
    name = pod["metadata"]["name"]
    out = {}
    for container in pod["spec"].get("containers", []):
        for mount in container.get("volumeMounts", []):
            if mount["name"] not in folders:
                raise UpError(
                    f"pod {name} mounts volume {mount['name']!r}; the local kubelet has "
                    "Secret, ConfigMap and emptyDir volumes only"
                )
            folder = folders[mount["name"]]
            out[mount["mountPath"]] = folder + (
                "/" + mount["subPath"] if "subPath" in mount else ""
            )
    return out


def probe_port(container: Mapping[str, Any], port: Any) -> int:
    """A probe's port as a number (a named one: the container's port of that name)."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if port not in named:
        raise UpError(f"container {container['name']}: probe port {port!r} is not named")
    return int(named[port])


def probe_url(address: str, container: Mapping[str, Any], probe: Mapping[str, Any]) -> str:
    """An httpGet probe's URL at the pod's address (a named port: the container's)."""
    get = probe["httpGet"]
    port = probe_port(container, get["port"])
    return f"http://{address}:{port}{get.get('path', '/')}"


def probe_exec(run: PodRun, process: Process, command: Sequence[str]) -> list[str]:
    """An exec probe's command, adapted like the container's own (a ``disagg`` command at
    the pod's address; another command with its loopback addresses replaced)."""
    if command and command[0] == "disagg":
        return _disagg(run.name, process.container, command, run.address, {})
    return [LOOPBACK.sub(run.address, a) for a in command]
