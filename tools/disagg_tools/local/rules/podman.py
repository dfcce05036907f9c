"""Rendered pods → pods of containers: what a kubelet would ask its container runtime for,
written as podman arguments.

Unlike the process runner (:mod:`disagg_tools.local.rules.pods`), nothing is adapted for
one host: each rendered pod becomes a podman pod with its own IP on the run's network, its
containers sharing its namespaces as in a Kubernetes pod, and what a kubelet fills in
(field and resource refs, ``$(VAR)``, volumes, Services as ``/etc/hosts`` names, a group's
leader name from :func:`disagg_tools.local.rules.groups.group_pods`) is filled in the same
way. What maps to what, and what is not here: docs/local-run.md (Pods as containers).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from disagg_operator.api import LABEL_ROLE as ROLE_LABEL
from disagg_operator.api.podtemplate import ENGINE_CONTAINER
from disagg_operator.contracts import lws
from disagg_operator.derive.resources import parse_quantity
from disagg_tools.local.rules import env as kubelet_env
from disagg_tools.local.rules.groups import is_group_worker, leader_name
from disagg_tools.local.rules.volumes import Volume, VolumeError, tmpfs_size, volume

RUN_LABEL = "disagg.dev/up-run"  # on every pod, container, volume and network of one run
SHM = "/dev/shm"
SHARE = "ipc,net,uts,pid"  # what a pod's containers share (Kubernetes: shareProcessNamespace)
NODE = "localhost"  # spec.nodeName of every pod: one node
ROLES = ("prefill", "decode")


class PlanError(ValueError):
    """A rendered pod asks for something this runner cannot give; the message says what
    and what to do."""


@dataclass(frozen=True)
class Probe:
    """One probe or hook action: ``http`` (GET port/path from the node), ``tcp`` (a
    connect), ``exec`` (a command in the container) or ``sleep`` (a preStop pause)."""

    kind: Literal["http", "tcp", "exec", "sleep"]
    port: int = 0
    path: str = "/"
    command: tuple[str, ...] = ()
    seconds: float = 0.0
    initial_delay_s: float = 0.0
    period_s: float = 10.0
    timeout_s: float = 1.0
    failure_threshold: int = 3
    success_threshold: int = 1

    def describe(self) -> str:
        what = {
            "http": f"GET :{self.port}{self.path}",
            "tcp": f"connect :{self.port}",
            "exec": " ".join(self.command),
            "sleep": f"sleep {self.seconds:g} s",
        }[self.kind]
        if self.kind == "sleep":
            return what
        return f"{what} every {self.period_s:g} s, {self.failure_threshold} failures"


@dataclass(frozen=True)
class Mount:
    volume: str
    target: str
    read_only: bool = False
    sub_path: str = ""


@dataclass(frozen=True)
class ContainerPlan:
    name: str  # as rendered ("engine", "transfer-canary")
    image: str  # the local image it runs
    command: tuple[str, ...] | None  # None: the image's entrypoint
    args: tuple[str, ...] | None  # None: the image's CMD (only when command is None too)
    env: Mapping[str, str]
    user: str | None  # "uid:gid", "uid", or None (the image's user)
    run_as_non_root: bool
    read_only: bool
    cap_drop: tuple[str, ...]
    cap_add: tuple[str, ...]
    no_new_privileges: bool
    mounts: tuple[Mount, ...]
    memory_bytes: int | None
    cpus: float | None
    cpu_shares: int | None
    ports: Mapping[str, int]  # port name (or the number as text) → containerPort
    startup: Probe | None = None
    readiness: Probe | None = None
    liveness: Probe | None = None
    pre_stop: Probe | None = None


@dataclass(frozen=True)
class PodPlan:
    name: str
    namespace: str
    role: str
    ip: str
    hostname: str
    labels: Mapping[str, str]
    hosts: Mapping[str, str]  # name → IP, for /etc/hosts
    volumes: tuple[Volume, ...]
    containers: tuple[ContainerPlan, ...]
    grace_s: float
    notes: tuple[str, ...] = ()
    shm_size: str = ""  # the pod's /dev/shm size, podman syntax; "" podman's default

    @property
    def engine_container(self) -> ContainerPlan:
        return next((c for c in self.containers if c.name == ENGINE_CONTAINER), self.containers[0])

    @property
    def url(self) -> str:
        """The engine's serving address on the run's network."""
        engine = self.engine_container
        port = engine.ports.get("http") or next(iter(engine.ports.values()), 8000)
        return f"http://{self.ip}:{port}"


def pods_of(objects: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The rendered prefill and decode pods, prefill first (decode's canary reads from
    prefill, so prefill pods start first)."""
    pods = [
        o
        for o in objects
        if o.get("kind") == "Pod" and o["metadata"].get("labels", {}).get(ROLE_LABEL) in ROLES
    ]
    return sorted(pods, key=lambda p: ROLES.index(p["metadata"]["labels"][ROLE_LABEL]))


def images_of(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every image the rendered pods run, in order of first use."""
    seen: dict[str, None] = {}
    for pod in pods_of(objects):
        for c in pod["spec"].get("containers", []):
            seen.setdefault(c["image"], None)
    return list(seen)


def plan_pods(
    objects: Sequence[Mapping[str, Any]],
    *,
    ips: Sequence[str],
    host_ip: str,
    images: Mapping[str, str],
    claims: Mapping[str, str],
    binds: Mapping[str, str] | None = None,
) -> list[PodPlan]:
    """The rendered objects' prefill and decode pods as :class:`PodPlan` s.

    ``ips[i]`` is the i-th pod's address on the run's network (in :func:`pods_of` order),
    ``host_ip`` the node's address there; ``images`` maps each rendered image to the
    local one that stands for it; ``claims`` maps a claim name to its local folder;
    ``binds`` maps host folders to mount at the same path in every container (a local
    ``--model DIR``)."""
    pods = pods_of(objects)
    if len(ips) < len(pods):
        raise PlanError(f"{len(pods)} pods need {len(pods)} addresses, got {len(ips)}")
    addresses = {p["metadata"]["name"]: ip for p, ip in zip(pods, ips, strict=False)}
    hosts = _service_hosts(objects, pods, addresses)
    data = kubelet_env.data_of(objects)
    try:  # what a kubelet would refuse in a pod's env or volumes
        return [
            _pod(pod, addresses, host_ip, hosts, images, claims, binds or {}, data) for pod in pods
        ]
    except (kubelet_env.EnvError, VolumeError) as e:
        raise PlanError(str(e)) from None


def _pod(
    pod: Mapping[str, Any],
    addresses: Mapping[str, str],
    host_ip: str,
    services: Mapping[str, str],
    images: Mapping[str, str],
    claims: Mapping[str, str],
    binds: Mapping[str, str],
    data: kubelet_env.Data,
) -> PodPlan:
    meta, spec = pod["metadata"], pod["spec"]
    name, namespace = meta["name"], meta.get("namespace", "default")
    if spec.get("initContainers"):
        names = ", ".join(c["name"] for c in spec["initContainers"])
        raise PlanError(
            f"pod {name} fetches its model with init container(s) {names}, which disagg up "
            "does not run; give a local model with --model DIR or a pvc:// model and --claim"
        )
    ctx = kubelet_env.PodFields(pod, addresses[name], host_ip, NODE)
    volumes = tuple(volume(name, v, ctx, claims, data) for v in spec.get("volumes", []))
    pod_security = spec.get("securityContext", {})
    containers = tuple(
        _container(name, c, ctx, images, pod_security, data, binds) for c in spec["containers"]
    )
    hostname = spec.get("hostname", name)
    hosts = dict(services)
    if spec.get("subdomain"):
        fqdn = f"{hostname}.{spec['subdomain']}.{namespace}.svc"
        hosts.update({fqdn: ctx.ip, f"{fqdn}.cluster.local": ctx.ip})
    notes = []
    shm = _shm_size(volumes, containers)
    if any(c.get("lifecycle", {}).get("postStart") for c in spec["containers"]):
        notes.append("postStart hooks are not run")
    return PodPlan(
        name=name,
        namespace=namespace,
        role=meta["labels"][ROLE_LABEL],
        ip=ctx.ip,
        hostname=hostname,
        labels=dict(meta.get("labels", {})),
        hosts=hosts,
        volumes=volumes,
        containers=containers,
        grace_s=float(spec.get("terminationGracePeriodSeconds", 30)),
        notes=tuple(notes),
        shm_size=shm,
    )


def _shm_size(volumes: Sequence[Volume], containers: Sequence[ContainerPlan]) -> str:
    """The pod's /dev/shm size when a memory emptyDir is mounted there: its sizeLimit, else
    the pod's memory limit (what bounds a memory-backed emptyDir on a node), else ""."""
    memory = {v.name: v for v in volumes if v.kind == "tmpfs"}
    at_shm = [m.volume for c in containers for m in c.mounts if m.target == SHM]
    chosen = [memory[name] for name in at_shm if name in memory]
    if not chosen:
        return ""
    if chosen[0].size:
        return chosen[0].size
    limit = sum(c.memory_bytes or 0 for c in containers)
    return tmpfs_size(limit) if limit else ""


def _container(
    pod: str,
    c: Mapping[str, Any],
    ctx: kubelet_env.PodFields,
    images: Mapping[str, str],
    pod_security: Mapping[str, Any],
    data: kubelet_env.Data,
    binds: Mapping[str, str],
) -> ContainerPlan:
    at = f"pod {pod} container {c['name']}"
    if c["image"] not in images:
        raise PlanError(f"{at}: no local image stands for {c['image']}")
    env = kubelet_env.container_env(at, c, ctx, data)
    security = {**pod_security, **c.get("securityContext", {})}
    if security.get("privileged"):
        raise PlanError(f"{at}: privileged containers are not run")
    uid, gid = security.get("runAsUser"), security.get("runAsGroup")
    if security.get("runAsNonRoot") and uid == 0:
        raise PlanError(f"{at}: runAsNonRoot with runAsUser 0 (a kubelet refuses it too)")
    user = None if uid is None else (f"{uid}:{gid}" if gid is not None else str(uid))
    caps = security.get("capabilities", {})
    limits = c.get("resources", {}).get("limits", {})
    requests = c.get("resources", {}).get("requests", {})
    if any("gpu" in k for k in {**limits, **requests}):
        raise PlanError(f"{at}: asks for a GPU ({', '.join(limits)}), which this host has not")
    cpu_request = requests.get("cpu", limits.get("cpu"))
    ports = {}
    for p in c.get("ports", []):
        ports[p.get("name") or str(p["containerPort"])] = int(p["containerPort"])
    command = c.get("command")
    args = c.get("args")
    mounts = [
        Mount(m["name"], m["mountPath"], bool(m.get("readOnly")), m.get("subPath", ""))
        for m in c.get("volumeMounts", [])
    ]
    mounts += [Mount(_bind_name(folder), folder, True) for folder in binds]
    probe = _probes(at, c, ports)
    return ContainerPlan(
        name=c["name"],
        image=images[c["image"]],
        command=None if command is None else tuple(kubelet_env.expand(a, env) for a in command),
        args=None if args is None else tuple(kubelet_env.expand(a, env) for a in args),
        env=env,
        user=user,
        run_as_non_root=bool(security.get("runAsNonRoot")),
        read_only=bool(security.get("readOnlyRootFilesystem")),
        cap_drop=tuple(caps.get("drop", [])),
        cap_add=tuple(caps.get("add", [])),
        no_new_privileges=security.get("allowPrivilegeEscalation") is False,
        mounts=tuple(mounts),
        memory_bytes=int(parse_quantity(limits["memory"])) if "memory" in limits else None,
        cpus=parse_quantity(limits["cpu"]) if "cpu" in limits else None,
        cpu_shares=max(2, int(parse_quantity(cpu_request) * 1024)) if cpu_request else None,
        ports=ports,
        **probe,
    )


def _bind_name(folder: str) -> str:
    return "bind:" + folder


def _probes(at: str, c: Mapping[str, Any], ports: Mapping[str, int]) -> dict[str, Probe | None]:
    out: dict[str, Probe | None] = {}
    for key, field_name in (
        ("startup", "startupProbe"),
        ("readiness", "readinessProbe"),
        ("liveness", "livenessProbe"),
    ):
        given = c.get(field_name)
        out[key] = None if given is None else _probe(f"{at} {field_name}", given, ports)
    pre_stop = c.get("lifecycle", {}).get("preStop")
    out["pre_stop"] = None if pre_stop is None else _probe(f"{at} preStop", pre_stop, ports)
    return out


def _probe(at: str, p: Mapping[str, Any], ports: Mapping[str, int]) -> Probe:
    timing = Probe(
        "exec",
        initial_delay_s=float(p.get("initialDelaySeconds", 0)),
        period_s=float(p.get("periodSeconds", 10)),
        timeout_s=float(p.get("timeoutSeconds", 1)),
        failure_threshold=int(p.get("failureThreshold", 3)),
        success_threshold=int(p.get("successThreshold", 1)),
    )
    if "httpGet" in p:
        get = p["httpGet"]
        if get.get("scheme", "HTTP") != "HTTP":
            raise PlanError(f"{at}: only HTTP probes are run here, not {get['scheme']}")
        port = _port(at, get["port"], ports)
        return replace(timing, kind="http", port=port, path=get.get("path", "/"))
    if "tcpSocket" in p:
        return replace(timing, kind="tcp", port=_port(at, p["tcpSocket"]["port"], ports))
    if "exec" in p:
        return replace(timing, command=tuple(p["exec"]["command"]))
    if "sleep" in p:
        return replace(timing, kind="sleep", seconds=float(p["sleep"]["seconds"]))
    raise PlanError(f"{at}: {', '.join(p)} probes are not run here (httpGet, tcpSocket, exec)")


def _port(at: str, port: int | str, ports: Mapping[str, int]) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    if port not in ports:
        raise PlanError(f"{at}: port {port!r} is not a named port of the container")
    return ports[port]


def _service_hosts(
    objects: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    addresses: Mapping[str, str],
) -> dict[str, str]:
    """Each Service's names → the address of the first pod it selects (headless Services:
    what cluster DNS answers, one pod of them)."""
    hosts: dict[str, str] = {}
    for svc in objects:
        if svc.get("kind") != "Service":
            continue
        selector = svc.get("spec", {}).get("selector") or {}
        chosen = next(
            (
                p
                for p in pods
                if selector
                and all(p["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
            ),
            None,
        )
        if chosen is None:
            continue
        name = svc["metadata"]["name"]
        namespace = svc["metadata"].get("namespace", "default")
        for host in (name, f"{name}.{namespace}", f"{name}.{namespace}.svc"):
            hosts[host] = addresses[chosen["metadata"]["name"]]
        hosts[f"{name}.{namespace}.svc.cluster.local"] = addresses[chosen["metadata"]["name"]]
    for pod in pods:  # a group's leader in the group's Service (LWS_LEADER_ADDRESS)
        labels = pod["metadata"].get("labels", {})
        if lws.LABEL_NAME in labels and not is_group_worker(labels):
            namespace = pod["metadata"].get("namespace", "default")
            leader = leader_name(labels[lws.LABEL_NAME], namespace)
            hosts[leader] = addresses[pod["metadata"]["name"]]
    return hosts


# ---------------------------------------------------------------------------------------
# podman arguments


def pod_create_argv(pod: PodPlan, network: str, run_id: str) -> list[str]:
    """``podman pod create`` for ``pod`` on ``network``."""
    argv = [
        "pod", "create", "--name", pod.name, "--network", network, "--ip", pod.ip,
        "--hostname", pod.hostname, "--share", SHARE, "--label", f"{RUN_LABEL}={run_id}",
    ]  # fmt: skip
    if pod.shm_size:
        argv += ["--shm-size", pod.shm_size]
    for host, ip in sorted(pod.hosts.items()):
        argv += ["--add-host", f"{host}:{ip}"]
    return argv


def container_name(pod: PodPlan, container: ContainerPlan) -> str:
    return f"{pod.name}-{container.name}"


def run_argv(pod: PodPlan, c: ContainerPlan, sources: Mapping[str, str], run_id: str) -> list[str]:
    """``podman run`` for container ``c`` of ``pod``, attached (its output is the log, its
    exit the container's). ``sources`` maps each volume name to the host folder podman
    mounts."""
    argv = [
        "run", "--replace", "--pod", pod.name, "--name", container_name(pod, c),
        "--label", f"{RUN_LABEL}={run_id}", "--sig-proxy=true", "--stop-timeout",
        str(math.ceil(pod.grace_s)),
    ]  # fmt: skip
    if c.user is not None:
        argv += ["--user", c.user]
    if c.read_only:
        argv += ["--read-only", "--read-only-tmpfs=false"]  # as a kubelet: no tmpfs added
    for cap in c.cap_drop:
        argv += ["--cap-drop", cap]
    for cap in c.cap_add:
        argv += ["--cap-add", cap]
    if c.no_new_privileges:
        argv += ["--security-opt", "no-new-privileges"]
    if c.memory_bytes is not None:
        argv += ["--memory", str(c.memory_bytes)]
    if c.cpus is not None:
        argv += ["--cpus", f"{c.cpus:g}"]
    if c.cpu_shares is not None:
        argv += ["--cpu-shares", str(c.cpu_shares)]
    for key, value in c.env.items():
        argv += ["--env", f"{key}={value}"]
    for m in c.mounts:
        if _pod_shm(m, pod):
            continue  # the pod's own /dev/shm stands for it (pod_create_argv sizes it)
        argv += ["--mount", _mount(m, pod, sources)]
    if c.command is not None:
        argv += ["--entrypoint", json.dumps(list(c.command))]
    argv.append(c.image)
    if c.args is not None:
        argv += list(c.args)
    elif c.command is not None:
        pass  # Kubernetes: a command without args drops the image's CMD
    return argv


def _pod_shm(m: Mount, pod: PodPlan) -> bool:
    return m.target == SHM and any(v.name == m.volume and v.kind == "tmpfs" for v in pod.volumes)


def _mount(m: Mount, pod: PodPlan, sources: Mapping[str, str]) -> str:
    if m.volume.startswith("bind:"):
        return f"type=bind,source={m.volume.removeprefix('bind:')},destination={m.target},ro=true"
    volume = next((v for v in pod.volumes if v.name == m.volume), None)
    if volume is None or m.volume not in sources:
        raise PlanError(f"pod {pod.name}: mount of volume {m.volume!r}, which the pod has not")
    source = sources[m.volume]
    read_only = m.read_only or volume.read_only
    path = f"{source}/{m.sub_path}" if m.sub_path else source
    return f"type=bind,source={path},destination={m.target}" + (",ro=true" if read_only else "")
