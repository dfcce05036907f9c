"""Start a rendered deployment's pods and the P/D proxy as local processes.

I/O layer shared by ``disagg up``, the vLLM benchmark and the vLLM contract tests: load
and render a manifest with the operator's code, adapt the pods for one host
(:mod:`disagg_tools.local.rules.pods`), start them, wait until each serves, then start the
proxy in front. Each pod listens at an address of its own with its rendered ports
(:class:`~disagg_tools.local.kubelet.network.Addresses`, as the local kubelet gives them),
so a restart (:mod:`disagg_tools.local.supervise`) comes back where it was. Every started
process is recorded in :class:`Run` as soon as it exists, so the caller's cleanup
(:func:`~disagg_tools.local.children.stop_children`) stops it whatever fails later.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from disagg_operator.contracts import lws
from disagg_operator.derive import tracing
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.render import router
from disagg_operator.render.objects import render
from disagg_operator.validation.spec import InvalidSpec, parse
from disagg_tools.local import serving
from disagg_tools.local.children import Child, disagg_argv, start_child, wait_ready
from disagg_tools.local.engines import LocalEngine, LocalRun, local_engine
from disagg_tools.local.kubelet import admit
from disagg_tools.local.kubelet.driver import PROCESSES
from disagg_tools.local.kubelet.network import Addresses
from disagg_tools.local.rules.groups import group_pods
from disagg_tools.local.rules.pods import (
    LOCAL,
    ROLE_LABEL,
    LocalPod,
    UpError,
    canary_argv,
    core_takers,
    local_pods,
    share_cores,
    volume_folder,
)

PROXY = "proxy"  # the proxy's process name (pods keep theirs)
CANARY_WAIT_S = 120.0  # one canary is bounded by its --timeout-s; this only guards the process
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


def write_volumes(pods: list[LocalPod], tmp: Path) -> None:
    """Each pod's volumes (its Secret, ConfigMaps, emptyDirs) where its process reads them,
    as the kubelet writes them (:func:`local_pods` put them under ``tmp``)."""
    for pod in pods:
        where = Path(volume_folder(str(tmp), pod.name))
        admit.write_volumes(pod.volumes, where, where / "memory")


def start_aggregated(
    manifest: Path, logs: Path, run: Run, *, model: str | None = None, say: Say = print
) -> str:
    """Start the manifest's decode pod without its KV connector: the aggregated engine a
    P/D deployment is judged against (same image, model, flags and CPU settings). Returns
    its URL (also ``run.workers["decode"]``)."""
    objects, engine = render_manifest(with_model(load(str(manifest)), model, say), "unused")
    decode = next(
        o for o in objects if o["kind"] == "Pod" and o["metadata"]["labels"][ROLE_LABEL] == "decode"
    )
    container = decode["spec"]["containers"][0]
    container["command"] = engine.aggregated(container["command"])
    # the cores the decode engine gets in the P/D run: a like-for-like engine
    cores = share_cores(core_takers(objects, engine), serving.host_cores())[-1:]
    alone = [o for o in objects if o is decode or o["kind"] != "Pod"]
    pods = local_pods(
        alone, engine, str(logs), addresses=Addresses(), host_ports=serving.free_ports(),
        cores=cores, pair=False,
    )  # fmt: skip
    write_volumes(pods, logs)
    start_workers(pods, logs, run, say)
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
    """Render ``manifest`` and start its pods and a proxy on ``port`` into ``run``.

    ``keep_cpu_binding``: run vLLM with the rendered CPU settings (``nobind``, as on a
    shared node) instead of one core list per engine; ``claims``: the local folder of each
    PersistentVolumeClaim the pods mount (a ``pvc://`` model)."""
    body = with_model(load(str(manifest)), model, say, claims)
    objects, engine = render_manifest(body, secrets.token_hex(32), groups=True)
    addresses = Addresses()  # a group's leader first: its workers' LWS_LEADER_ADDRESS
    objects = group_pods(objects, lambda group, _: addresses(lws.leader_pod(group)))
    engines = core_takers(objects, engine)
    cores = [] if keep_cpu_binding else share_cores(engines, serving.host_cores())
    if keep_cpu_binding and engines:
        say("  vLLM CPU binding as rendered (--keep-cpu-binding): engines share this host's cores")
    host = len(serving.host_cores())
    if cores and engines > host:
        say(f"  only {host} cores for {engines} vLLM engines: cores are shared")
    pods = local_pods(
        objects, engine, str(tmp), addresses=addresses, host_ports=serving.free_ports(),
        cores=cores, claims=claims,
    )  # fmt: skip
    write_volumes(pods, tmp)
    say(f"rendered {len(pods)} pods from {manifest}; starting them as local processes")
    dropped = sorted({d for p in pods for d in p.dropped})
    if dropped:
        say(
            f"  dropped cluster-only {', '.join(dropped)}: "
            "UCX picks local transports (shared memory, CMA)"
        )
    start_workers(pods, logs, run, say)
    run.proxy_flags, run.proxy_env = router_settings(body)
    urls = {name: url for url, name in run.names.items()}  # the router reads each pod's
    run.proxy_flags += [  # KV events where it publishes them
        f for p in pods if p.events and p.name in urls
        for f in ("--kv-events-endpoint", f"{urls[p.name]}={p.events}")
    ]  # fmt: skip
    start_proxy(port, logs, run, say)
    prove_transfer_path(pods, run, say)
    if engine.run.warm_up:
        took = serving.warm_pd(run.proxy_url, say)
        say(f"  warm    P/D path: {took:.0f} ms (first NIXL handshake and connection)")


def start_workers(pods: list[LocalPod], log_dir: Path, run: Run, say: Say) -> None:
    for pod in pods:
        child = PROCESSES.create(pod.name, pod.argv, pod.env, log_dir)
        run.children.append(child)
        run.logs[pod.name] = child.log_path
        say(f"  started {pod.role} {pod.name} (pid {child.proc.pid})")
        for note in pod.adapted:
            say(f"          {note}")
    for pod, child in zip(pods, run.children, strict=True):
        if not pod.serves:  # a group's worker: its ranks join the leader, which says ready
            continue
        url = f"http://{pod.address}:{pod.http_port}"
        if pod.local.readiness == "health":
            took = serving.wait_healthy(child, url, pod.local.start_timeout_s, say)
            # vLLM CPU on AMX hosts dies (SIGILL) when an engine's first forward pass is a
            # decode step over transferred KV; one local request first avoids it.
            warm = f"; warm-up request {serving.warm_up(url):.0f} ms" if pod.local.warm_up else ""
            label = f"{pod.local.label}, " if pod.local.label else ""
            say(f"  ready   {pod.role} {pod.name}: {url} ({label}started in {took:.0f} s{warm})")
        else:
            info = wait_ready(child, timeout_s=pod.local.start_timeout_s)
            side = info.get("side_channel_port")
            say(
                f"  ready   {pod.role} {pod.name}: {url}"
                + (f", side channel {pod.address}:{side}" if side else "")
            )
            health = get_json(url + "/health")
            if health.get("status") != "ok":
                raise UpError(f"{url}/health: {health}")
        run.workers.setdefault(pod.role, []).append(url)
        run.names[url] = pod.name
        run.local = pod.local


def prove_transfer_path(pods: list[LocalPod], run: Run, say: Say) -> None:
    """Run each decode pod's transfer canary once, as its readiness probe would in a
    cluster (prefill max_tokens 1, then this decode with the returned kv_transfer_params),
    and say what it proved; a failure is said, not fatal (in a cluster the pod would stay
    unready and TransferPathReady False)."""
    urls = {name: url for url, name in run.names.items()}
    for pod in pods:
        argv = canary_argv(pod, run.workers["prefill"][0], urls.get(pod.name, ""))
        if not argv:
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=CANARY_WAIT_S)
            result = json.loads(done.stdout.splitlines()[-1])
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            say(f"  canary  {pod.name}: no verdict within {CANARY_WAIT_S:g} s")
            continue
        if result.get("passed"):
            took = result["took_ms"]
            say(
                f"  proven  transfer path to {pod.name}: canary passed in {took:.0f} ms "
                "(incl. the first handshake and NIXL connection of this pair)"
            )
        else:
            say(f"  FAILED  transfer path to {pod.name}: {result.get('problem')}")
        for r in result.get("ranks", []):  # pods of data-parallel engines: each pair's request
            verdict = "passed" if r["passed"] else f"FAILED: {r['problem']}"
            say(
                f"          prefill engine {r['prefill_rank']} (side channel "
                f"{r['side_channel']}) to decode engine {r['decode_rank']}: {verdict}"
            )


def start_proxy(port: int, log_dir: Path, run: Run, say: Say) -> None:
    child = start_child(PROXY, _proxy_argv(port, run), {**os.environ, **run.proxy_env}, log_dir)
    run.children.append(child)
    info = wait_ready(child, timeout_s=60)
    child.argv = _proxy_argv(info["http_port"], run)  # a restart keeps the address
    run.proxy_url = f"http://{LOCAL}:{info['http_port']}"
    say(f"  ready   proxy (pid {child.proc.pid}): {run.proxy_url}")


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


def _proxy_argv(port: int, run: Run) -> list[str]:
    argv = disagg_argv("proxy", "--port", str(port), "--prefill", *run.workers["prefill"])
    return [*argv, "--decode", *run.workers["decode"], *run.proxy_flags]
