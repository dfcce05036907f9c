"""Run a rendered deployment's pods and the P/D proxy on a local kubelet of the run's own.

I/O layer shared by ``disagg up``, the vLLM benchmarks and the vLLM contract tests: load
and render a manifest with the operator's code, plan its pods for one host
(:mod:`disagg_tools.local.rules.pods`: what cannot run here is refused before anything
starts), then hand them to a local kubelet with an API server of its own and no operator
(:class:`~disagg_tools.local.kubelet.standalone.Standalone`). The kubelet runs every
container as a process at the pod's address (:class:`~disagg_tools.local.kubelet.network.Addresses`)
with its rendered ports, decides readiness with the rendered probes (a decode pod is
Ready once its canary sidecar has carried a P/D request) and restarts what dies on the
local back-off. The proxy runs in front, a pod on this host's network. :class:`Run` keeps
what started, and :func:`stop_run` stops it whatever failed.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from disagg_operator.api.podtemplate import ENGINE_CONTAINER
from disagg_operator.contracts import lws
from disagg_operator.derive import tracing
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning.pods import is_ready
from disagg_operator.render import router
from disagg_operator.render.objects import render
from disagg_operator.validation.spec import InvalidSpec, parse
from disagg_tools.local import serving
from disagg_tools.local.children import (
    Child,
    ChildError,
    stop_children,
)
from disagg_tools.local.engines import LocalEngine, LocalRun, local_engine
from disagg_tools.local.kubelet.network import Addresses
from disagg_tools.local.kubelet.node import NodeConfig
from disagg_tools.local.kubelet.rules.containers import PodRun
from disagg_tools.local.kubelet.standalone import RESOURCES, Standalone
from disagg_tools.local.rules import status
from disagg_tools.local.rules.backoff import LOCAL_RUN
from disagg_tools.local.rules.groups import group_pods
from disagg_tools.local.rules.pods import (
    CANARY,
    LOCAL,
    ROLE_LABEL,
    LocalPod,
    UpError,
    core_takers,
    local_pods,
    role_pods,
    share_cores,
)

PROXY = "proxy"  # the proxy's pod and container name (pods keep theirs)
PROXY_IMAGE = "disagg-local-proxy"  # the proxy pod's image: a name, the process is `disagg`
PROXY_START_S = 60.0
SIDE_CHANNEL = "side-channel"  # the engine container's port the prefill advertises
START_S = 30.0  # the kubelet starts a created pod's containers within a tick or two
HELD = set(RESOURCES) - {"DisaggregatedDeployment", "Deployment"}  # what a run creates: no
# router Deployment (the run's own proxy fronts it), nothing nobody enforces here
Say = Callable[[str], None]


@dataclass
class Run:
    """The processes of one local run and their endpoints."""

    children: list[Child]
    workers: dict[str, list[str]]
    proxy_url: str = ""
    proxy_flags: list[str] = field(default_factory=list)  # the routing policy's, tracing's
    proxy_env: dict[str, str] = field(default_factory=dict)  # tracing's sampler
    local: LocalRun | None = None  # how its engine runs here (the pods' engine)
    logs: dict[str, Path] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # worker URL → pod name
    # what removes the run's containers, pods and network (podman runs): its argument cuts
    # the stop's waits short when set; it returns what it could not remove
    teardown: Callable[[threading.Event], list[str]] | None = None
    engines: dict[str, Child] = field(default_factory=dict)  # pod name → its engine's process
    node: Standalone | None = None  # the local kubelet the pods run on (process runs)
    namespace: str = "default"  # the deployment's


def stop_run(run: Run, graceful: bool = False, hurry: threading.Event | None = None) -> None:
    """Stop what the run started: its kubelet's pods (``graceful``: each one's preStop and
    grace, as a namespace's deletion, cut short once ``hurry`` is set; else at once), then
    any process it started itself."""
    if run.node is not None:
        run.node.close(graceful, hurry)
        run.node = None
    stop_children(run.children)


def wait_pod_ready(run: Run, name: str, timeout_s: float) -> float:
    """Block until pod ``name`` of the run is Ready again (its probes say so); the seconds
    it took. UpError naming the pod once ``timeout_s`` has passed."""
    assert run.node is not None
    t0 = time.monotonic()
    while not is_ready(run.node.get("Pod", name, run.namespace) or {}):
        if time.monotonic() - t0 > timeout_s:
            raise UpError(f"pod {name} not Ready again within {timeout_s:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - t0


def side_channel(run: Run, name: str) -> tuple[str, int]:
    """Where pod ``name``'s engine serves its side channel: the pod's address and the
    engine container's rendered port."""
    assert run.node is not None
    pod = run.node.pods()[name]
    port = _side_channel_port(pod)
    assert port is not None
    return pod.address, port


def _side_channel_port(pod: PodRun) -> int | None:
    """The engine container's rendered side-channel port (None: it declares none)."""
    engine = pod.engine
    assert engine is not None
    ports = {q.get("name"): q["containerPort"] for q in engine.spec.get("ports", [])}
    return int(ports[SIDE_CHANNEL]) if SIDE_CHANNEL in ports else None


def restarts(run: Run, name: str) -> int:
    """How often pod ``name``'s containers have been restarted so far (its status)."""
    assert run.node is not None
    return status.restarts(run.node.get("Pod", name, run.namespace) or {})


def wait_restarted(run: Run, name: str, since: int, timeout_s: float) -> float:
    """Block until pod ``name`` has been restarted past ``since`` restarts and is Ready
    again; the seconds it took. UpError naming the pod once ``timeout_s`` has passed."""
    t0 = time.monotonic()
    while restarts(run, name) <= since:
        if time.monotonic() - t0 > timeout_s:
            raise UpError(f"pod {name} was not restarted within {timeout_s:.0f} s")
        time.sleep(0.05)
    return wait_pod_ready(run, name, max(0.0, timeout_s - (time.monotonic() - t0)))


def watch(run: Run, stop: threading.Event, say: Say) -> None:
    """Serve until ``stop``, saying each container's exit and restart, its back-off, and
    each change of a pod's readiness, as the kubelet reports them (it restarts what dies,
    on :data:`~disagg_tools.local.rules.backoff.LOCAL_RUN`'s back-off)."""
    node = run.node
    assert node is not None
    # each pod as the run left it: Ready, never restarted (a restart while starting stops it)
    seen: dict[str, tuple[bool, int, str]] = {n: (True, 0, "") for n in [*run.engines, PROXY]}
    back: set[str] = set()  # restarted, not Ready since
    while True:
        for name in [*run.engines, PROXY]:
            body = node.get("Pod", name, run.namespace) or {}
            now = (is_ready(body), status.restarts(body), status.back_off(body))
            before = seen.setdefault(name, now)
            if now[1] > before[1]:
                exited = status.exited(body)
                how = f"{exited[0]} {exited[1]}" if exited else "a container exited"
                say(f"restart   {name}: {how} (restart {now[1]})")
                back.add(name)
            if now[2] and now[2] != before[2]:
                say(f"waiting   {name}: {now[2]}")
            if now[0] and (not before[0] or name in back):
                pids = ", ".join(f"pid {p}" for p in _pids(node, name))
                say(f"ready     {name} ({pids})")
                back.discard(name)
            elif before[0] and not now[0]:
                say(f"unready   {name}: {status.waiting_for(body)}")
            seen[name] = now
        if stop.wait(0.5):
            return


def _pids(node: Standalone, pod: str) -> list[int]:
    """The process ids of a pod's running containers, the engine's first."""
    found = node.children().get(pod, {})
    order = sorted(found, key=lambda c: c != ENGINE_CONTAINER)
    return [found[c].proc.pid for c in order if found[c].proc.poll() is None]


def load(path: str) -> dict[str, Any]:
    try:
        docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
    except (OSError, yaml.YAMLError) as e:
        raise UpError(f"{path}: {e}") from None
    found = [d for d in docs if isinstance(d, dict) and d.get("kind") == "DisaggregatedDeployment"]
    if len(found) != 1:
        raise UpError(f"{path}: expected one DisaggregatedDeployment, found {len(found)}")
    body = dict(found[0])
    body["metadata"] = {"namespace": "default", "uid": "local", **body.get("metadata", {})}
    return body


def render_manifest(
    body: dict[str, Any], hmac_key: str, settings: Settings = DEFAULT, *, groups: bool = False
) -> tuple[list[dict[str, Any]], LocalEngine]:
    """The manifest's objects, rendered with ``settings``, and its engine's local-run part.
    ``groups``: the caller plays LeaderWorkerSet's part (its engine's LocalRun says whether
    it can); else an instance that spans pods is refused."""
    try:
        objects = render(body, hmac_key=hmac_key, settings=settings)
    except InvalidSpec as e:
        raise UpError("invalid manifest:\n  " + "\n  ".join(map(str, e.problems))) from None
    try:
        engine = local_engine(body["spec"]["engine"]["type"])
    except ValueError as e:
        raise UpError(str(e)) from None
    spanning = sorted(o["metadata"]["name"] for o in objects if o["kind"] == lws.KIND)
    if spanning and not (groups and engine.run.groups):
        fix = (
            "run it without --runtime (the process runtime plays LeaderWorkerSet's part)"
            if engine.run.groups
            else f"engine {engine.name!r} spans pods only on a cluster with the "
            "LeaderWorkerSet controller"
        )
        raise UpError(
            f"instances that span pods ({', '.join(spanning)}: nodesPerInstance above 1) "
            f"cannot start here: {fix}, or set nodesPerInstance: 1 to run here "
            "(docs/multinode.md)"
        )
    return objects, engine


def get_json(url: str, body: dict[str, Any] | None = None, timeout: float = 5.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as e:
        detail = json.load(e).get("error", {}).get("message", e.reason)
        raise UpError(f"{url} answered {e.code}: {detail}") from None


def with_model(
    body: dict[str, Any], model: str | None, say: Say, claims: dict[str, str] | None = None
) -> dict[str, Any]:
    """``body`` with spec.model replaced by the local directory ``model`` (if given), and
    spec.modelConfig.weightsMemory read from the local checkpoint (``model``, or a
    ``pvc://`` model's folder in ``claims``) when the manifest does not say it."""
    spec = dict(body.get("spec", {}))
    local: Path | None
    if model:
        local = Path(model).resolve()
        if not local.is_dir():
            raise UpError(f"--model {model}: no such directory")
        say(f"spec.model {spec.get('model')!r} → {local} (--model)")
        spec["model"] = str(local)
    else:
        local = _claimed(str(spec.get("model", "")), claims or {})
    weights = sum(f.stat().st_size for f in local.glob("*.safetensors")) if local else 0
    model_config = dict(spec.get("modelConfig") or {})
    if weights and "weightsMemory" not in model_config:
        model_config["weightsMemory"] = weights
        spec["modelConfig"] = model_config
        say(f"spec.modelConfig.weightsMemory → {weights / 2**20:.0f} MiB (the checkpoint's files)")
    return {**body, "spec": spec}


def _claimed(model: str, claims: dict[str, str]) -> Path | None:
    """The local folder of a ``pvc://claim/path`` model whose claim has one."""
    if not model.startswith("pvc://"):
        return None
    claim, _, path = model.removeprefix("pvc://").partition("/")
    return Path(claims[claim], path) if claim in claims else None


def start_aggregated(
    manifest: Path, logs: Path, run: Run, *, model: str | None = None, say: Say = print
) -> str:
    """Start the manifest's decode pod without its KV connector: the aggregated engine a
    P/D deployment is judged against (same image, model, flags and CPU settings). Returns
    its URL (also ``run.workers["decode"]``)."""
    body = with_model(load(str(manifest)), model, say)
    objects, engine = render_manifest(body, "unused")
    roles = {p["metadata"]["labels"][ROLE_LABEL]: p for p in role_pods(objects)}
    name = roles["decode"]["metadata"]["name"]
    # the cores the decode engine gets in the P/D run: a like-for-like engine
    cores = share_cores(core_takers(objects, engine), serving.host_cores())[-1:]

    def alone(rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [o for o in rendered if o["kind"] != "Pod" or o["metadata"]["name"] == name]
        for pod in (o for o in kept if o["kind"] == "Pod"):
            pod["spec"]["containers"] = [  # the engine alone: no canary without a prefill
                {**c, "command": engine.aggregated(c["command"])}
                for c in pod["spec"]["containers"]
                if c["name"] == ENGINE_CONTAINER
            ]
        return kept

    _on_kubelet(body, logs, run, _Launch(cores, alone=alone, say=say))
    return run.workers["decode"][0]


def launch(
    manifest: Path,
    tmp: Path,
    logs: Path,
    run: Run,
    *,
    port: int = 0,
    model: str | None = None,
    keep_cpu_binding: bool = False,
    claims: dict[str, str] | None = None,
    say: Say = print,
) -> None:
    """Render ``manifest`` and run its pods and a proxy on ``port`` into ``run``, on the
    local kubelet (:class:`~disagg_tools.local.kubelet.standalone.Standalone`).

    ``keep_cpu_binding``: run vLLM with the rendered CPU settings (``nobind``, as on a
    shared node) instead of one core list per engine; ``claims``: the local folder of each
    PersistentVolumeClaim the pods mount (a ``pvc://`` model)."""
    body = with_model(load(str(manifest)), model, say, claims)
    objects, engine = render_manifest(body, "unused", groups=True)
    engines = core_takers(objects, engine)
    cores = [] if keep_cpu_binding else share_cores(engines, serving.host_cores())
    if keep_cpu_binding and engines:
        say("  vLLM CPU binding as rendered (--keep-cpu-binding): engines share this host's cores")
    host = len(serving.host_cores())
    if cores and engines > host:
        say(f"  only {host} cores for {engines} vLLM engines: cores are shared")
    _on_kubelet(body, tmp, run, _Launch(cores, claims or {}, logs, say=say), manifest)
    run.proxy_flags, run.proxy_env = router_settings(body)
    pods = run.node.pods() if run.node is not None else {}
    run.proxy_flags += [  # the router reads each pod's KV events where it publishes them
        f for url, name in run.names.items() if pods[name].events
        for f in ("--kv-events-endpoint", f"{url}={pods[name].events}")
    ]  # fmt: skip
    start_proxy_pod(port, run, say)
    _proven(run, say)
    if engine.run.warm_up:
        took = serving.warm_pd(run.proxy_url, say)
        say(f"  warm    P/D path: {took:.0f} ms (first NIXL handshake and connection)")


@dataclass(frozen=True)
class _Launch:
    """How :func:`_on_kubelet` runs a manifest: each pod's cores (in rendered order), the
    claims' folders, where logs go, a change to the rendered objects (``alone``), and
    where progress is said."""

    cores: Sequence[Sequence[int]] = ()
    claims: Mapping[str, str] = field(default_factory=dict)
    logs: Path | None = None
    alone: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
    say: Say = print


def _on_kubelet(
    body: dict[str, Any], tmp: Path, run: Run, how: _Launch, manifest: Path | None = None
) -> None:
    """The manifest ``body``'s pods on a local kubelet of the run's own: planned first (what
    cannot run here is refused before anything starts), then its DisaggregatedDeployment
    and rendered objects created as the operator's first sync leaves them, every pod
    started, each one waited for until its probes say Ready."""
    key = secrets.token_hex(32)
    addresses = Addresses()  # a group's leader first: its workers' LWS_LEADER_ADDRESS

    def rendered(found: dict[str, Any]) -> list[dict[str, Any]]:
        objects, _ = render_manifest(found, key, groups=True)
        objects = group_pods(objects, lambda group, _: addresses(lws.leader_pod(group)))
        return how.alone(objects) if how.alone else objects

    objects = rendered(body)
    engine = local_engine(body["spec"]["engine"]["type"])
    plan = local_pods(
        objects, engine, str(tmp), addresses=addresses, cores=how.cores, claims=how.claims,
        pair=how.alone is None,
    )  # fmt: skip
    names = [p.name for p in plan]
    config = NodeConfig(
        crash_loop=LOCAL_RUN, claims=how.claims, addresses=addresses,
        cores=dict(zip(names, how.cores, strict=False)) if engine.run.cores else {},
        host_ports=serving.free_ports(), logs=how.logs,
    )  # fmt: skip
    node = run.node = Standalone(tmp / "node", config).start()
    run.namespace = body["metadata"].get("namespace") or "default"
    owner = node.create(body)  # its pods' owner; the kubelet looks their engine up in it
    held = [o for o in rendered({**body, "metadata": owner["metadata"]}) if o["kind"] in HELD]
    if manifest is not None:
        net = plan[0].address.rsplit(".", 1)[0] if plan else "?"
        how.say(
            f"rendered {len(plan)} pods from {manifest}; starting them on a local kubelet "
            f"(pods at {net}.0/24)"
        )
    dropped = sorted({d for p in plan for d in p.dropped})
    if dropped:
        how.say(
            f"  dropped cluster-only {', '.join(dropped)}: "
            "UCX picks local transports (shared memory, CMA)"
        )
    for obj in sorted(held, key=lambda o: o["kind"] == "Pod"):  # what the pods read first
        node.create(obj)
    _started(plan, node, run, how.say)
    for pod in plan:
        if pod.serves:  # a group's worker: its ranks join the leader, which says ready
            _ready(pod, node, run, how.say)


def _started(plan: list[LocalPod], node: Standalone, run: Run, say: Say) -> None:
    """Wait until each planned pod's engine runs; say its pid and what was adapted."""
    deadline = time.monotonic() + START_S
    for pod in plan:
        while node.pid(pod.name, ENGINE_CONTAINER) is None:
            _refused(node)
            if time.monotonic() > deadline:
                raise UpError(f"the local kubelet did not start pod {pod.name}")
            time.sleep(0.05)
        found = node.children()[pod.name]
        pids = [f"pid {found[ENGINE_CONTAINER].proc.pid}"]
        pids += [
            f"{name} pid {c.proc.pid}" for name, c in found.items() if name != ENGINE_CONTAINER
        ]
        say(f"  started {pod.role} {pod.name} ({'; '.join(pids)})")
        for note in node.pods()[pod.name].notes:
            say(f"          {note}")
    containers = node.children()
    run.children[:0] = [c for pod in plan for c in containers[pod.name].values()]
    run.engines.update({pod.name: containers[pod.name][ENGINE_CONTAINER] for pod in plan})


def _ready(pod: LocalPod, node: Standalone, run: Run, say: Say) -> None:
    """Wait until ``pod`` is Ready (its probes, its canary's included), then record and say
    where it serves (:func:`_until_ready`)."""
    took = _until_ready(node, run, pod.name, pod.local.start_timeout_s, say)
    started = node.pods()[pod.name]
    engine = started.engine
    assert engine is not None
    url = f"http://{started.address}:{engine.port}"
    run.workers.setdefault(pod.role, []).append(url)
    run.names[url] = pod.name
    run.logs[pod.name] = run.engines[pod.name].log_path
    run.local = pod.local
    if pod.local.warm_up:
        # vLLM CPU on AMX hosts dies (SIGILL) when an engine's first forward pass is a
        # decode step over transferred KV; one local request first avoids it.
        warm = f"; warm-up request {serving.warm_up(url):.0f} ms"
        label = f"{pod.local.label}, " if pod.local.label else ""
        say(f"  ready   {pod.role} {pod.name}: {url} ({label}Ready in {took:.0f} s{warm})")
        return
    side = _side_channel_port(started) if pod.role == "prefill" else None
    say(
        f"  ready   {pod.role} {pod.name}: {url}"
        + (f", side channel {started.address}:{side}" if side else "")
    )


def _until_ready(
    node: Standalone, run: Run, name: str, timeout_s: float, say: Say | None = None
) -> float:
    """Wait until pod ``name`` is Ready while it starts, saying progress every 15 s when
    ``say`` is given; the seconds it took. A refused pod, a container that exits while it
    starts, or no Ready within ``timeout_s`` stops the run with its log's last lines."""
    t0 = time.monotonic()
    note = t0 + serving.PROGRESS_S
    while not is_ready(body := node.get("Pod", name, run.namespace) or {}):
        _refused(node)
        exited = status.exited(body)
        now = time.monotonic()
        if exited or now - t0 > timeout_s:
            found = node.children().get(name, {})
            container = exited[0] if exited else ENGINE_CONTAINER
            child = found.get(container) or next(iter(found.values()), None)
            tail = child.log_tail(30) if child else ""
            why = exited[1] if exited else f"not Ready after {timeout_s:.0f} s"
            raise ChildError(f"{name} ({container}) {why} while starting; last log lines:\n{tail}")
        if say is not None and now >= note:
            say(f"  ...     {name}: {status.waiting_for(body)} ({now - t0:.0f} s)")
            note = now + serving.PROGRESS_S
        time.sleep(0.1)
    return time.monotonic() - t0


def _refused(node: Standalone) -> None:
    failed = node.failed()
    if failed:
        raise UpError(failed[0])


def start_proxy_pod(port: int, run: Run, say: Say) -> None:
    """The P/D proxy as a pod of the run's kubelet on this host's network (``hostNetwork``,
    so it listens at 127.0.0.1:``port``; 0: a free port), with the router Deployment's
    routing and tracing flags and sampler env; restarted as a pod's container is."""
    node = run.node
    assert node is not None
    port = port or next(serving.free_ports())
    argv = ["disagg", "proxy", "--port", str(port), "--prefill", *run.workers["prefill"]]
    argv += ["--decode", *run.workers["decode"], *run.proxy_flags]
    container = {
        "name": PROXY, "image": PROXY_IMAGE, "command": argv,
        "env": [{"name": k, "value": v} for k, v in run.proxy_env.items()],
        "readinessProbe": {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 1},
    }  # fmt: skip
    meta = {"name": PROXY, "namespace": run.namespace}
    node.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                 "spec": {"hostNetwork": True, "containers": [container]}})  # fmt: skip
    _until_ready(node, run, PROXY, PROXY_START_S)
    run.children.append(node.children()[PROXY][PROXY])
    run.proxy_url = f"http://{LOCAL}:{port}"
    say(f"  ready   proxy (pid {node.pid(PROXY, PROXY)}): {run.proxy_url}")


def _proven(run: Run, say: Say) -> None:
    """What each decode pod's canary sidecar proved before its pod turned Ready: its latest
    verdict, from its log (the canary logs each change of the transfer path)."""
    node = run.node
    assert node is not None
    for name, containers in node.children().items():
        canary = containers.get(CANARY)
        if canary is None:
            continue
        events = [e for e in _json_lines(canary.log_path) if e.get("event") == "transfer_path"]
        if not events:
            continue
        last = events[-1]  # the path as its pod's readiness last saw it
        if last.get("ready"):
            wire = f", over {last['wire']}" if last.get("wire") else ""
            say(
                f"  proven  transfer path to {name}: canary passed in {last['took_ms']:.0f} ms "
                f"(incl. the first handshake and NIXL connection of this pair{wire})"
            )
        else:
            say(f"  FAILED  transfer path to {name}: {last.get('problem')}")


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects among a log's lines."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def router_settings(
    body: dict[str, Any], settings: Settings = DEFAULT
) -> tuple[list[str], dict[str, str]]:
    """The router Deployment's flags (spec.routing, spec.tracing) and its tracing sampler
    variables, as it is rendered: what the local proxy runs with."""
    dd, _ = parse(body, settings)
    if dd is None:
        return [], {}
    flags = [*router.routing_args(dd.spec, settings), *router.tracing_args(dd.spec)]
    return flags, tracing.sampler_env(dd.spec)
