"""Start a rendered deployment's pods as pods of containers, then the P/D proxy in front.

I/O layer of ``disagg up --runtime podman``, the container counterpart of
:func:`disagg_tools.local.stack.launch`: render the manifest with the operator's code,
map its images to the ones built here (``make images``), plan each pod
(:mod:`.plan`), create the run's network, volumes and pods (:mod:`.runtime`), start every
container and wait for its startup and readiness probes, prefill first; then the proxy
(a host process, reaching the pods over the run's network), then each decode pod's
canary-gated engine must be ready: its readiness is its transfer canary's, a real prefill
→ decode transfer between two pods. Everything made is recorded in ``run`` at once, so
the caller's cleanup (``run.teardown``) removes it whatever fails later.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from disagg_operator.api import CANARY_PORT
from disagg_tools.local import serving
from disagg_tools.local.children import Child, disagg_argv, start_child, wait_ready
from disagg_tools.local.engines import LocalEngine
from disagg_tools.local.podman.runtime import (
    PodmanError,
    PodRuntime,
    describe_images,
    image_exists,
    image_user,
    sweep,
)
from disagg_tools.local.rules.groups import group_pods, is_group_worker, leader_name
from disagg_tools.local.rules.podman import (
    ContainerPlan,
    PlanError,
    PodPlan,
    Probe,
    container_name,
    images_of,
    plan_pods,
    pods_of,
)
from disagg_tools.local.rules.pods import LOCAL, UpError
from disagg_tools.local.stack import (
    PROXY,
    Run,
    load,
    render_manifest,
    router_settings,
    with_model,
)
from disagg_tools.local.supervise import PROXY_START_S, Member, Supervisor, logged_ready

Say = Callable[[str], None]


def start_proxy(port: int, log_dir: Path, run: Run, say: Say) -> None:
    """The P/D proxy as a process of this host in front of the run's pods (``port`` 0:
    a free one, kept across restarts)."""
    child = start_child(PROXY, _proxy_argv(port, run), {**os.environ, **run.proxy_env}, log_dir)
    run.children.append(child)
    info = wait_ready(child, timeout_s=PROXY_START_S)
    child.argv = _proxy_argv(info["http_port"], run)  # a restart keeps the address
    run.proxy_url = f"http://{LOCAL}:{info['http_port']}"
    say(f"  ready   proxy (pid {child.proc.pid}): {run.proxy_url}")


def _proxy_argv(port: int, run: Run) -> list[str]:
    argv = disagg_argv("proxy", "--port", str(port), "--prefill", *run.workers["prefill"])
    return [*argv, "--decode", *run.workers["decode"], *run.proxy_flags]


def resolve_images(
    rendered: Sequence[str], engine: LocalEngine, overrides: Mapping[str, str]
) -> dict[str, str]:
    """Each rendered image → the local image that runs it: ``--image FROM=TO`` first, then
    the image itself when this host has it, then the local build that stands for it
    (:meth:`~disagg_tools.local.engines.base.LocalEngine.image`)."""
    out, missing = {}, []
    for image in rendered:
        for candidate in (overrides.get(image), image, engine.image(image)):
            if candidate and image_exists(candidate):
                out[image] = candidate
                break
        else:
            missing.append(f"{image} (or its local build {engine.image(image)})")
    if missing:
        raise UpError(
            "no local image for " + "; ".join(missing) + ": build them with `make images`, "
            "or name one with --image RENDERED=LOCAL"
        )
    return out


def launch_containers(
    manifest: Path,
    tmp: Path,
    logs: Path,
    run: Run,
    *,
    port: int = 0,
    model: str | None = None,
    claims: Mapping[str, str] | None = None,
    images: Mapping[str, str] | None = None,
    say: Say = print,
) -> PodRuntime:
    """Render ``manifest`` and start its pods as containers and a proxy on ``port`` into
    ``run`` (see the module docstring)."""
    key = secrets.token_hex(32)
    body = with_model(load(str(manifest)), model, say, dict(claims or {}))
    objects, engine = render_manifest(body, key, groups=True)
    objects = group_pods(objects, leader_name)  # LWS's part: each pod has its own address
    mapping = resolve_images(images_of(objects), engine, images or {})
    runtime = PodRuntime(tmp, logs, say)
    run.teardown = runtime.remove
    sweep(say)
    for line in describe_images(mapping):
        say(line)
    try:
        ips = runtime.network(len(pods_of(objects)))
        binds = {str(Path(model).resolve()): str(Path(model).resolve())} if model else {}
        plans = plan_pods(
            objects,
            ips=ips,
            host_ip=runtime.host_ip,
            images=mapping,
            claims=claims or {},
            binds=binds,
        )
        _check_non_root(plans)
        runtime.make_pods(plans)
    except (PlanError, PodmanError) as e:
        raise UpError(str(e)) from None
    say(
        f"rendered {len(plans)} pods from {manifest}; starting them as pods of containers "
        f"on network {runtime.name} (node {runtime.host_ip})"
    )
    _start_pods(plans, runtime, engine, run, say)
    run.proxy_flags, run.proxy_env = router_settings(body)
    start_proxy(port, logs, run, say)
    _prove_transfer_path(plans, runtime, run, say)
    if engine.run.warm_up:
        took = serving.warm_pd(run.proxy_url, say)
        say(f"  warm    P/D path: {took:.0f} ms (first NIXL handshake and connection)")
    return runtime


def _check_non_root(plans: Sequence[PodPlan]) -> None:
    """runAsNonRoot without a runAsUser: the image's own user must not be root, as the
    kubelet checks before it starts the container."""
    for pod in plans:
        for c in pod.containers:
            if c.run_as_non_root and c.user is None:
                user = image_user(c.image).split(":")[0]
                if user in ("", "0", "root"):
                    raise UpError(
                        f"pod {pod.name} container {c.name}: runAsNonRoot, but image "
                        f"{c.image} runs as root; set runAsUser or use a non-root image"
                    )


def _user(c: ContainerPlan) -> str:
    """Who the container runs as: the rendered user, else the image's."""
    return c.user or f"{image_user(c.image) or 'root'} (the image's)"


def _log_name(pod: PodPlan, c: ContainerPlan) -> str:
    """The engine's log is named after its pod (as the process runner names it)."""
    return pod.name if c is pod.engine_container else container_name(pod, c)


def _start_pods(
    plans: Sequence[PodPlan], runtime: PodRuntime, engine: LocalEngine, run: Run, say: Say
) -> None:
    for pod in plans:
        for c in pod.containers:
            child = runtime.run(pod, c, _log_name(pod, c))
            run.children.append(child)
            run.logs[child.name] = child.log_path
        say(
            f"  started {pod.role} {pod.name} at {pod.ip}: "
            + ", ".join(f"{c.name} ({c.image}, user {_user(c)})" for c in pod.containers)
        )
        for note in pod.notes:
            say(f"          {note}")
    for pod in plans:
        if is_group_worker(pod.labels):  # its ranks join the leader, which says ready
            continue
        c = pod.engine_container
        child = runtime.child(pod, c)
        try:
            took = runtime.wait_ready(pod, c, child, engine.run.start_timeout_s, say)
        except PodmanError as e:
            raise UpError(str(e)) from None
        warm = ""
        if engine.run.warm_up:
            warm = f"; warm-up request {serving.warm_up(pod.url):.0f} ms"
        say(f"  ready   {pod.role} {pod.name}: {pod.url} (started in {took:.0f} s{warm})")
        run.workers.setdefault(pod.role, []).append(pod.url)
        run.names[pod.url] = pod.name
        run.local = engine.run


def _prove_transfer_path(plans: Sequence[PodPlan], runtime: PodRuntime, run: Run, say: Say) -> None:
    """Each container gated by a transfer canary must turn ready: the decode engine, whose
    readiness probe is its canary's ``/ready`` (a sidecar with its own readiness probe, in
    older renders, alike); it passes only after a prefill → decode transfer the canary
    made between the pods."""
    for pod in plans:
        for c in pod.containers:
            gated = c.readiness is not None and c.readiness.port == CANARY_PORT
            if c.readiness is None or (c is pod.engine_container and not gated):
                continue
            child = runtime.child(pod, c)
            budget = c.readiness.period_s * c.readiness.failure_threshold + 30.0
            try:
                took = runtime.wait_ready(pod, c, child, budget, say)
            except PodmanError as e:
                say(f"  FAILED  {c.name} of {pod.name}: {str(e).splitlines()[0]}")
                continue
            say(
                f"  proven  transfer path to {pod.name}: its {c.name} is ready "
                f"({c.readiness.describe().split(' every')[0]}, {took:.0f} s)"
            )


def supervisor(run: Run, runtime: PodRuntime, say: Say) -> Supervisor:
    """A :class:`Supervisor` over every container of the run and the proxy: a container
    that exits, or fails its liveness probe ``failureThreshold`` times, is started again
    in its pod (same address) after the back-off."""
    members = [
        Member(child, PROXY, run.proxy_url, logged_ready, PROXY_START_S)
        for child in run.children
        if child.name == PROXY
    ]
    for pod in runtime.pods:
        for c in pod.containers:
            child = runtime.child(pod, c)
            gate = c.readiness or c.startup
            members.append(
                Member(
                    child,
                    pod.role,
                    pod.url,
                    _probe(runtime, pod, c, gate),
                    max(run.local.start_timeout_s if run.local else 120.0, 60.0),
                    liveness=None if c.liveness is None else _probe(runtime, pod, c, c.liveness),
                    liveness_period_s=c.liveness.period_s if c.liveness else 10.0,
                    liveness_threshold=c.liveness.failure_threshold if c.liveness else 3,
                    driver=runtime,
                )
            )
    return Supervisor(members, say)


def _probe(
    runtime: PodRuntime, pod: PodPlan, c: ContainerPlan, probe: Probe | None
) -> Callable[[Child], bool]:
    if probe is None:
        return lambda child: child.proc.poll() is None
    return lambda _child: runtime.check(pod, c, probe)


def teardown_note(left: list[str]) -> str:
    if not left:
        return "removed every pod, container, volume and network of the run"
    return "could not remove: " + ", ".join(left)
