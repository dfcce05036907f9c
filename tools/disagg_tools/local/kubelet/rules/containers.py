"""A pod of the API as processes on this host, each pod at its own address.

Each pod gets an address of its own on the loopback network (the node's 127.0.N.0/24), so every
container listens on the ports it was rendered with, as in a pod; what a pod's containers
share (the pod's network namespace) becomes that address: ``127.0.0.1``, ``localhost`` and
``0.0.0.0`` in their arguments and env are the pod's address, and a ``disagg`` command that
takes ``--host`` gets it. The engine container is its engine's local-run module's to adapt
(``LocalEngine.process`` of :mod:`disagg_tools.local.engines`, with the pod's ``address``);
other containers must run ``disagg`` (the canary, the router). Env, command and args are
the kubelet's (:mod:`disagg_tools.local.rules.env`: references, ``$(VAR)``); volumes are
:mod:`disagg_tools.local.rules.volumes`', each a folder of the pod's :class:`Place` that the
caller writes before the processes start, and their mount paths in arguments and env
become those folders. Cluster DNS is the kubelet's name table (:data:`HOSTS_ENV`, read by
a shim). The cluster-only ``UCX_TLS`` is dropped (UCX picks shared memory and CMA on one
host). The local kubelet and ``disagg up`` run pods through this one rule.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from disagg_operator.api.podtemplate import ENGINE_CONTAINER
from disagg_tools.local.engines import LocalEngine
from disagg_tools.local.engines.base import disagg_argv
from disagg_tools.local.kubelet.rules import probes
from disagg_tools.local.rules import env as kubelet_env
from disagg_tools.local.rules import volumes as volume_rules
from disagg_tools.local.rules.volumes import Volume

# Cluster DNS on one host: the kubelet's table, answered by a shim first on each process's
# PYTHONPATH (kubelet/dns/sitecustomize.py; the product resolves names the cluster's way)
HOSTS_ENV = "LOCAL_KUBELET_HOSTS_FILE"
DNS_SHIM = str(resources.files("disagg_tools.local.kubelet").joinpath("dns"))
LOOPBACK = re.compile(r"(?<![\w.])(127\.0\.0\.1|localhost|0\.0\.0\.0)(?![\w.])")
TAKES_HOST = (["worker", "canary"], ["proxy"])  # `disagg` commands with a listen --host
CLUSTER_ONLY = ("UCX_TLS", "DISAGG_UCX_TLS")
NODE = "local"  # spec.nodeName of every pod a local process runs


class UpError(RuntimeError):
    """Something stops a pod from running here; the message says what and what to do."""


class Waiting(UpError):
    """A ConfigMap or Secret the pod reads does not exist yet: a kubelet tries again."""


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
    """A pod as processes at ``address``, and the volumes to write before they start."""

    name: str
    namespace: str
    address: str
    processes: list[Process]
    grace_s: float
    notes: list[str] = field(default_factory=list)  # what was adapted for this host
    volumes: tuple[Volume, ...] = ()
    dropped: list[str] = field(default_factory=list)  # cluster-only env, NAME=value
    events: str = ""  # where the engine's KV events are read (tcp://HOST:PORT), if any

    @property
    def engine(self) -> Process | None:
        """The engine container's process (None: a pod without one, e.g. the router's)."""
        return next((p for p in self.processes if p.port), None)


@dataclass(frozen=True)
class Place:
    """Where a pod runs on this host: its ``address``; the folders its volumes are written
    to (``volumes``; ``memory`` for memory emptyDirs) and each claim's local folder
    (``claims``); the cluster DNS name table its processes read (``hosts_file``; "" for
    none); the cores a CPU manager gives it (``cores``: empty, the rendered binding stays)
    and free ports of this host for what its engine binds on every address
    (``host_ports``; None: the rendered ports)."""

    address: str
    volumes: str
    memory: str
    claims: Mapping[str, str] = field(default_factory=dict)
    hosts_file: str = ""
    cores: Sequence[int] = ()
    host_ports: Iterator[int] | None = None


def pod_run(
    pod: Mapping[str, Any], place: Place, engine: LocalEngine | None, data: kubelet_env.Data
) -> PodRun:
    """``pod`` (an API or rendered object) as processes at ``place``; ``engine``: the
    engine of a prefill or decode pod (None for others, e.g. the router's); ``data``: the
    ConfigMaps and Secrets its env and volumes read. Raises UpError naming what cannot run
    here."""
    meta, spec = pod["metadata"], pod["spec"]
    name, namespace, address = meta["name"], meta.get("namespace", "default"), place.address
    if spec.get("initContainers"):
        names = ", ".join(c["name"] for c in spec["initContainers"])
        raise UpError(
            f"pod {name} has init container(s) {names}, which local runs do not run; for a "
            "model it fetches, give a local one (--model DIR, or a pvc:// model and --claim)"
        )
    fields = kubelet_env.PodFields(pod, address, address, NODE)
    try:
        volumes = tuple(
            volume_rules.volume(name, v, fields, place.claims, data)
            for v in spec.get("volumes", [])
        )
    except kubelet_env.Missing as e:
        raise Waiting(str(e)) from None
    except (volume_rules.VolumeError, kubelet_env.EnvError) as e:
        raise UpError(str(e)) from None
    folders = {v.name: volume_rules.source(v, place.volumes, place.memory) for v in volumes}
    secret = volume_rules.secret_file(volumes, folders) or f"{place.volumes}/no-handshake-key"
    mounts = _mounts(pod, folders)
    processes, events, dropped = [], "", set()
    notes = [
        f"claim {v.ref} (mounted at {at}) → {v.folder}" for at, v in _claim_mounts(pod, volumes)
    ]
    for container in spec.get("containers", []):
        _probes(name, container)
        at = f"pod {name} container {container['name']}"
        try:
            env = kubelet_env.container_env(at, container, fields, data)
        except kubelet_env.Missing as e:
            raise Waiting(str(e)) from None
        except kubelet_env.EnvError as e:
            raise UpError(str(e)) from None
        command = kubelet_env.container_command(container, env)
        env, gone = without_cluster_only(env)
        env = {k: _local(v, address, mounts) for k, v in env.items()}
        dropped.update(gone)
        port = 0
        if container["name"] == ENGINE_CONTAINER and engine is not None:
            command = [_local(a, address, mounts) for a in command]
            try:
                done = engine.process(
                    name, command, env, secret_path=secret, address=address,
                    cores=place.cores, host_ports=place.host_ports,
                )  # fmt: skip
            except (NotImplementedError, ValueError) as e:
                raise UpError(str(e)) from None
            argv, env, port, events = done.argv, done.env, done.http_port, done.events
            notes += done.adapted
        else:
            argv = _disagg(name, container["name"], command, address, mounts)
        if place.hosts_file:
            env = with_dns({**env, HOSTS_ENV: place.hosts_file})
        hook = ((container.get("lifecycle") or {}).get("preStop") or {}).get("exec") or {}
        pre_stop = _exec(name, container["name"], hook["command"], address, mounts) if hook else []
        processes.append(Process(container["name"], argv, env, container, pre_stop, port))
    grace = float(spec.get("terminationGracePeriodSeconds", 30))
    return PodRun(
        name, namespace, address, processes, grace, notes, volumes, sorted(dropped), events
    )


def _claim_mounts(pod: Mapping[str, Any], volumes: Sequence[Volume]) -> list[tuple[str, Volume]]:
    """(mount path, volume) of each claim a container mounts, once per path."""
    claims = {v.name: v for v in volumes if v.kind == "claim"}
    found = {
        m["mountPath"]: claims[m["name"]]
        for c in pod["spec"].get("containers", [])
        for m in c.get("volumeMounts", [])
        if m["name"] in claims
    }
    return sorted(found.items())


def without_cluster_only(env: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """``env`` without the cluster-only variables, and those dropped as ``NAME=value``."""
    kept = {k: v for k, v in env.items() if k not in CLUSTER_ONLY}
    return kept, [f"{k}={v}" for k, v in env.items() if k in CLUSTER_ONLY]


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
    return _exec(run.name, process.container, command, run.address, {})


def _exec(
    pod: str, container: str, command: Sequence[str], address: str, mounts: Mapping[str, str]
) -> list[str]:
    """A command run in a container (an exec probe, a preStop hook): a ``disagg`` command
    as the container's own; another (``sleep``, ``curl``) as it is, its loopback the pod's
    address and its mount paths the volumes' folders."""
    if command and command[0] == "disagg":
        return _disagg(pod, container, command, address, mounts)
    return [_local(a, address, mounts) for a in command]
