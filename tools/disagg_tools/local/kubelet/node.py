"""The local kubelet: every pod the API server has becomes processes on this host, probed
and restarted as a Kubernetes 1.36 kubelet does, its status written back.

I/O layer (the API through :mod:`.api`, containers through :mod:`.runtime` and its
:class:`~.driver.Driver`, probes through :mod:`.prober`); the rules are :mod:`.rules`'
and :mod:`disagg_tools.local.rules.backoff`'s, ported so that readiness, restarts and
deletion act as in a cluster. :meth:`Kubelet.tick` admits new pods (an address, volumes,
processes, probe workers, a finalizer so a delete waits), observes containers, runs due
probes and writes changed status. The endpoints, cluster DNS and the Deployments are
:mod:`.controllers`'s. docs/local-run.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from disagg_tools.local.engines import BUILTIN, LocalEngine
from disagg_tools.local.kubelet import admit, network, prober
from disagg_tools.local.kubelet.api import Api
from disagg_tools.local.kubelet.driver import PROCESSES, Driver
from disagg_tools.local.kubelet.rules import containers, lifecycle, probes
from disagg_tools.local.kubelet.runtime import Box, rfc3339
from disagg_tools.local.rules.backoff import CrashLoop

log = logging.getLogger("disagg.kubelet")
FINALIZER = "disagg.dev/local-kubelet"
KUBELET_1_36 = CrashLoop()  # 10 s doubling to 300 s, reset after 600 s running
HOST_NETWORK = "127.0.0.1"  # a hostNetwork pod's address: this host's


@dataclass
class Pod:
    """A pod this kubelet runs."""

    uid: str
    run: containers.PodRun
    boxes: dict[str, Box]
    body: dict[str, Any]  # the pod as last listed
    started: str = field(default_factory=rfc3339)
    phase: str = "Pending"
    sync: bool = True  # a pod sync is due (readiness triggers)
    going: asyncio.Task[None] | None = None  # the termination, once deleted
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # probe kills
    written: Any = None  # the status last written

    @property
    def deleting(self) -> bool:
        return bool(self.body["metadata"].get("deletionTimestamp"))

    @property
    def done(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class NodeConfig:
    """How a local kubelet is configured: the local-run part of each engine
    (``engines``), its sync period (``tick_s``), its restart back-off (``crash_loop``),
    its container runtime (``driver``) and the local folder standing for each claim
    (``claims``, a local persistent volume). What a cluster's CPU manager, IPAM and host
    ports would decide can be the caller's: ``addresses`` (pod name → its address; None:
    the kubelet's own, going round its network), ``cores`` (pod name → the cores a CPU
    manager gives it; a pod not named keeps its rendered binding) and ``host_ports``
    (free ports of this host for what an engine binds on every address; None: the
    rendered ports, so two such pods collide). ``logs``: the folder of every container's
    log (``<pod>-<container>.log``; None: each pod's own folder in the workdir)."""

    engines: Mapping[str, LocalEngine] = field(default_factory=lambda: BUILTIN)
    tick_s: float = 0.1
    crash_loop: CrashLoop = KUBELET_1_36
    driver: Driver = PROCESSES
    claims: Mapping[str, str] = field(default_factory=dict)
    addresses: Callable[[str], str] | None = None
    cores: Mapping[str, Sequence[int]] = field(default_factory=dict)
    host_ports: Iterator[int] | None = None
    logs: Path | None = None


class Kubelet:
    """Runs the API server's pods here (module docstring). ``workdir`` holds the pods'
    logs, volumes and the name table of each namespace (``hosts/<namespace>``); ``net``
    the pod network it holds (``127.0.N.``)."""

    def __init__(
        self, api: Api, workdir: Path, config: NodeConfig | None = None, net: str = "127.0.1."
    ) -> None:
        self.api, self.workdir, self.net = api, workdir, net
        self.config = config or NodeConfig()
        self.pods: dict[str, Pod] = {}  # by pod uid
        self.failed: dict[str, str] = {}  # pod uid → why it cannot run here
        self.waiting: dict[str, tuple[str, str]] = {}  # pod uid → (its address, what for)
        self._http: aiohttp.ClientSession | None = None
        self._engines: dict[str, LocalEngine | None] = {}

    def hosts_file(self, namespace: str) -> Path:
        return self.workdir / "hosts" / namespace

    def address_of(self, name: str, namespace: str = "default") -> str | None:
        found = [
            p for p in self.pods.values() if (p.run.name, p.run.namespace) == (name, namespace)
        ]
        return found[0].run.address if found else None

    async def run(self, stop: asyncio.Event) -> None:
        """Tick until ``stop``, then stop every pod's processes."""
        self._http = aiohttp.ClientSession()
        try:
            while not stop.is_set():
                try:
                    await self.tick()
                except Exception:  # a tick that failed is tried again; say why
                    log.exception("local kubelet tick failed")
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.config.tick_s)
        finally:
            for pod in self.pods.values():
                for task in [pod.going, *pod.tasks]:
                    if task is not None:
                        task.cancel()
            self.config.driver.stop(
                [b.child for p in self.pods.values() for b in p.boxes.values()], 2.0
            )
            await self._http.close()

    async def tick(self) -> None:
        listed = {p["metadata"]["uid"]: p for p in await self.api.list("v1", "pods")}
        for uid, body in listed.items():
            pod = self.pods.get(uid)
            if uid in self.failed:
                continue
            if pod is None:
                if not body["metadata"].get("deletionTimestamp"):
                    await self._start(body)
                continue
            pod.body = body
            if pod.deleting and pod.going is None:
                pod.going = asyncio.ensure_future(self._terminate(pod))
        for uid in [u for u in self.waiting if u not in listed]:  # deleted while it waited
            del self.waiting[uid]
        for uid in [u for u in self.pods if u not in listed]:  # gone without us: kill it
            for box in self.pods.pop(uid).boxes.values():
                box.kill_now()
        now = time.monotonic()
        for pod in list(self.pods.values()):
            self._step(pod, now)
            if pod.uid in self.pods:
                await self._write_status(pod)

    # ------------------------------------------------------------------ start and stop

    async def _start(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        uid, name, namespace = meta["uid"], meta["name"], meta.get("namespace", "default")
        address = self.waiting[uid][0] if uid in self.waiting else self._address(body)
        folder = self.workdir / "pods" / f"{namespace}-{name}-{uid[:8]}"
        volumes = folder / "volumes"
        config = self.config
        place = containers.Place(
            address, str(volumes), str(volumes / "memory"), config.claims,
            hosts_file=str(self.hosts_file(namespace)), cores=config.cores.get(name, ()),
            host_ports=config.host_ports,
        )  # fmt: skip
        try:
            engine = await admit.engine(self.api, config.engines, body, self._engines)
            run = containers.pod_run(body, place, engine, await admit.data(self.api, body))
        except containers.Waiting as e:  # tried again next tick, as a kubelet's pod worker
            if self.waiting.get(uid, ("", ""))[1] != str(e):
                log.info("pod %s/%s waits: %s", namespace, name, e)
            self.waiting[uid] = (address, str(e))
            return
        except containers.UpError as e:
            self.waiting.pop(uid, None)
            self.failed[uid] = str(e)
            log.warning("pod %s/%s cannot run here: %s", namespace, name, e)
            await self.api.patch(
                "v1", "pods", namespace, name, {"status": _failed(str(e))}, sub="status"
            )
            return
        self.waiting.pop(uid, None)
        admit.write_volumes(run.volumes, volumes, volumes / "memory")
        logs = self.config.logs or folder / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        finalizers = [*meta.get("finalizers", []), FINALIZER]
        await self.api.patch(
            "v1", "pods", namespace, name, {"metadata": {"finalizers": finalizers}}
        )
        now, boxes = time.monotonic(), {}
        for process in run.processes:
            workers = probes.Probes.of(process.spec, origin=now)  # added before it starts
            child = self.config.driver.create(
                f"{name}-{process.container}", process.argv, process.env, logs
            )
            boxes[process.container] = Box(
                process, child, workers, uid, self.config.driver, started_at=now
            )
        self.pods[uid] = Pod(uid, run, boxes, body)
        log.info("started pod %s/%s at %s", namespace, name, address)

    def _address(self, body: Mapping[str, Any]) -> str:
        """The pod's address: this host's for a ``hostNetwork`` pod (the node's network),
        the caller's IPAM's when it has one, else the next free one of the network."""
        if body["spec"].get("hostNetwork"):
            return HOST_NETWORK
        if self.config.addresses is not None:
            return self.config.addresses(body["metadata"]["name"])
        return self._free_address()

    def _free_address(self) -> str:
        held = [p.run.address for p in self.pods.values()] + [a for a, _ in self.waiting.values()]
        taken = {int(a.rsplit(".", 1)[1]) for a in held if a.startswith(self.net)}
        return f"{self.net}{network.reserve(self.net, taken)}"

    async def _terminate(self, pod: Pod) -> None:
        """A deleted pod: each container's preStop, SIGTERM, SIGKILL at the end of the
        grace (``killPod``, all containers at once); its last status; its finalizer."""
        run, meta = pod.run, pod.body["metadata"]
        grace = float(meta.get("deletionGracePeriodSeconds", run.grace_s))
        running = [b for b in pod.boxes.values() if b.running]
        await asyncio.gather(*(b.stop(grace) for b in running))
        now = time.monotonic()
        for box in pod.boxes.values():
            box.observe(pod.body, self.config.crash_loop, now)
        await self._write_status(pod)
        self.pods.pop(pod.uid, None)
        body = await self.api.get("v1", "pods", run.namespace, run.name)
        if body is not None:
            kept = [f for f in body["metadata"].get("finalizers", []) if f != FINALIZER]
            await self.api.patch(
                "v1", "pods", run.namespace, run.name, {"metadata": {"finalizers": kept}}
            )
        log.info("stopped pod %s/%s", run.namespace, run.name)

    # ------------------------------------------------------------------ running pods

    def _step(self, pod: Pod, now: float) -> None:
        """One pod sync's worth: exits and starts, kills for failed probes, readiness
        triggers, then the probes that are due."""
        for box in pod.boxes.values():
            pod.sync |= box.observe(pod.body, self.config.crash_loop, now)
            if box.running and box.killing is None and not pod.deleting:
                why = box.probes.kill_reason(box.seen(pod.deleting, pod.done))
                if why is not None:
                    self._kill(pod, box, why)
        if pod.sync:
            pod.sync = False
            for box in pod.boxes.values():
                box.probes.sync(box.seen(pod.deleting, pod.done), now)
        self._probe(pod, now)

    def _kill(self, pod: Pod, box: Box, why: str) -> None:
        """Kill a container that failed its liveness or startup probe, within the probe's
        ``terminationGracePeriodSeconds`` if it sets one, else the pod's."""
        kind = probes.LIVENESS if "liveness" in why else probes.STARTUP
        grace = (box.process.spec.get(kind) or {}).get("terminationGracePeriodSeconds")
        log.info("pod %s: container %s %s, killing", pod.run.name, box.name, why)
        task = asyncio.ensure_future(box.kill(pod.body, float(grace or pod.run.grace_s)))
        pod.tasks.add(task)
        task.add_done_callback(pod.tasks.discard)

    def _probe(self, pod: Pod, now: float) -> None:
        for box in pod.boxes.values():
            seen = box.seen(pod.deleting, pod.done)
            for kind, worker in box.probes.workers.items():
                if kind in box.inflight or not worker.due(now):
                    continue
                worker.ticked(now)
                before = (worker.instance, worker.result)
                go = worker.prepare(seen, now)
                pod.sync |= (worker.instance, worker.result) != before
                if go:
                    box.inflight.add(kind)
                    task = asyncio.ensure_future(self._run_probe(pod, box, worker, seen.instance))
                    task.add_done_callback(functools.partial(_done, box.inflight, kind))

    async def _run_probe(self, pod: Pod, box: Box, worker: probes.Worker, instance: str) -> None:
        assert self._http is not None
        env = self.config.driver.exec_env(box.process.env)
        result = await prober.attempt(
            self._http, pod.run, box.process, worker.rule, env, driver=self.config.driver
        )
        if worker.instance == instance and not worker.gone:  # not a container since gone
            pod.sync |= worker.record(result)

    async def _write_status(self, pod: Pod) -> None:
        statuses = [b.status(pod.deleting, pod.done) for b in pod.boxes.values()]
        stopped = not any(b.running for b in pod.boxes.values())
        phase = lifecycle.phase(pod.body["spec"], statuses, done=pod.deleting and stopped)
        status: dict[str, Any] = {
            "phase": phase,
            "podIP": pod.run.address,
            "podIPs": [{"ip": pod.run.address}],
            "hostIP": pod.run.address,
            "hostIPs": [{"ip": pod.run.address}],
            "startTime": pod.started,
            "containerStatuses": statuses,
            "conditions": lifecycle.conditions(pod.body, statuses, phase, rfc3339()),
        }
        pod.phase = phase
        if status == pod.written:
            return
        pod.written = status
        await self.api.patch(
            "v1", "pods", pod.run.namespace, pod.run.name, {"status": status}, sub="status"
        )


def _done(inflight: set[str], kind: str, _: object) -> None:
    inflight.discard(kind)


def _failed(why: str) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "reason": "LocalKubelet",
        "message": why,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": rfc3339()}],
    }
