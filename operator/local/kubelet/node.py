"""The local kubelet: every pod the API server has becomes processes on this host, probed
as a kubelet probes them, its status written back.

I/O layer (the API through :mod:`.api`, processes through ``disagg_worker.serve.localrun``).
Each :meth:`Kubelet.tick`:

- a new pod gets an address (127.0.1.N), its Secret, ConfigMap and emptyDir volumes as
  folders, its containers as processes (:mod:`.containers`), a finalizer so that a delete
  waits for it, and a status (``Running``, ``podIP``, each container started, not ready);
- each container's probes run when due (:mod:`.probes`: HTTP GET, TCP, exec, each within
  its timeout, in the background); readiness changes are written to the pod's status
  (``Ready`` and ``ContainersReady``, ``containerStatuses[].ready``); a failed liveness or
  startup probe, or a process that exited, restarts that container (``restartCount``,
  ``CrashLoopBackOff`` while it waits ``disagg up``'s back-off:
  :mod:`disagg_operator.local.rules.backoff`);
- a pod being deleted turns unready at once (its endpoints say terminating), runs each
  container's preStop, then SIGTERM, SIGKILL at the end of its grace period, and then its
  finalizer goes (the API server removes it).

The endpoints and the Deployments are :mod:`.controllers`'s; this only runs pods.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from disagg_operator.api import API_VERSION, HMAC_KEY, LABEL_DEPLOYMENT, PLURAL
from disagg_operator.engines.base import Engine
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.local.kubelet.api import Api
from disagg_operator.local.kubelet.rules import containers, probes
from disagg_operator.local.rules.backoff import BackOff, next_restart
from disagg_worker.serve.localrun import Child, spawn, start_child, stop_children

log = logging.getLogger("disagg.kubelet")
FINALIZER = "disagg.dev/local-kubelet"
NET = "127.0.1."
BACKOFF = BackOff()  # a kubelet's CrashLoopBackOff: 1 s doubling to 30 s, reset after 60 s served


def now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Box:
    """One container of a running pod: its process and probes."""

    process: containers.Process
    child: Child
    probes: probes.Container
    restarts: int = 0
    waiting: str = ""  # a reason while it waits to restart
    restart_at: float = 0.0
    attempt: int = 0  # restarts in a row (the back-off's)
    ready_at: float | None = None  # when it last turned ready since its start
    inflight: set[str] = field(default_factory=set)  # probes being run


@dataclass
class Pod:
    """A pod this kubelet runs."""

    uid: str
    run: containers.PodRun
    boxes: dict[str, Box]
    ready: bool = False
    going: asyncio.Task[None] | None = None  # the termination, once deleted
    written: Any = None  # the status last written


class Kubelet:
    """Runs the API server's pods here (module docstring). ``workdir`` holds the pods'
    logs, volumes and the name table of each namespace (``hosts/<namespace>``)."""

    def __init__(
        self, api: Api, workdir: Path, settings: Settings = DEFAULT, tick_s: float = 0.1
    ) -> None:
        self.api, self.workdir, self.settings, self.tick_s = api, workdir, settings, tick_s
        self.pods: dict[str, Pod] = {}  # by pod uid
        self.failed: dict[str, str] = {}  # pod uid → why it cannot run here
        self._http: aiohttp.ClientSession | None = None
        self._engines: dict[str, Engine | None] = {}

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
                    await asyncio.wait_for(stop.wait(), self.tick_s)
        finally:
            for pod in self.pods.values():
                if pod.going is not None:
                    pod.going.cancel()
            stop_children([b.child for p in self.pods.values() for b in p.boxes.values()], 2.0)
            await self._http.close()

    async def tick(self) -> None:
        listed = await self.api.list("v1", "pods")
        seen = {p["metadata"]["uid"]: p for p in listed}
        for uid, body in seen.items():
            if uid in self.failed:
                continue
            pod = self.pods.get(uid)
            if pod is None and not body["metadata"].get("deletionTimestamp"):
                await self._start(body)
            elif pod is not None and body["metadata"].get("deletionTimestamp") and not pod.going:
                pod.going = asyncio.ensure_future(self._terminate(pod))
        for uid in [u for u in self.pods if u not in seen]:  # gone without us: kill it
            gone = self.pods.pop(uid)
            stop_children([b.child for b in gone.boxes.values()], 0.5, signal.SIGKILL)
        now = time.monotonic()
        for pod in list(self.pods.values()):
            if pod.going is None:
                self._restart_exited(pod, now)
                self._probe(pod, now)
                await self._write_status(pod)

    # ------------------------------------------------------------------ start and stop

    async def _start(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        uid, name, namespace = meta["uid"], meta["name"], meta.get("namespace", "default")
        address = self._free_address()
        folder = self.workdir / "pods" / f"{namespace}-{name}-{uid[:8]}"
        try:
            folders, secret_path = await self._volumes(body, folder / "volumes")
            secrets, maps = await self._lookups(body)
            run = containers.pod_run(
                body,
                address,
                await self._engine(body),
                secret_path=secret_path,
                folders=folders,
                hosts_file=str(self.hosts_file(namespace)),
                secrets=secrets,
                config_maps=maps,
            )
        except containers.UpError as e:
            self.failed[uid] = str(e)
            log.warning("pod %s/%s cannot run here: %s", namespace, name, e)
            await self.api.patch(
                "v1", "pods", namespace, name, {"status": _failed(str(e))}, sub="status"
            )
            return
        (folder / "logs").mkdir(parents=True, exist_ok=True)
        finalizers = [*meta.get("finalizers", []), FINALIZER]
        await self.api.patch(
            "v1", "pods", namespace, name, {"metadata": {"finalizers": finalizers}}
        )
        now = time.monotonic()
        boxes = {}
        for process in run.processes:
            child = start_child(process.container, process.argv, _env(process.env), folder / "logs")
            boxes[process.container] = Box(
                process, child, probes.Container.started(process.spec, now)
            )
        self.pods[uid] = Pod(uid, run, boxes)
        log.info("started pod %s/%s at %s", namespace, name, address)

    def _free_address(self) -> str:
        taken = {p.run.address for p in self.pods.values()}
        n = next(n for n in range(2, 255) if f"{NET}{n}" not in taken)
        return f"{NET}{n}"

    async def _engine(self, body: Mapping[str, Any]) -> Engine | None:
        """The engine of a prefill or decode pod (from its DisaggregatedDeployment)."""
        meta = body["metadata"]
        owner = (meta.get("labels") or {}).get(LABEL_DEPLOYMENT)
        if owner is None:
            return None
        key = f"{meta.get('namespace', 'default')}/{owner}"
        if key not in self._engines:
            found = await self.api.get(API_VERSION, PLURAL, meta.get("namespace", "default"), owner)
            kind = ((found or {}).get("spec") or {}).get("engine", {}).get("type")
            self._engines[key] = self.settings.engines.get(kind) if kind else None
        return self._engines[key]

    async def _volumes(self, body: Mapping[str, Any], folder: Path) -> tuple[dict[str, str], str]:
        """Secret, ConfigMap and emptyDir volumes as folders; the handshake key's file."""
        namespace = body["metadata"].get("namespace", "default")
        out, secret_path = {}, str(folder / "no-handshake-key")
        for volume in body["spec"].get("volumes", []):
            where = folder / volume["name"]
            where.mkdir(parents=True, exist_ok=True)
            data: dict[str, bytes] = {}
            if "secret" in volume:
                got = await self.api.get("v1", "secrets", namespace, volume["secret"]["secretName"])
                data = {k: base64.b64decode(v) for k, v in ((got or {}).get("data") or {}).items()}
            elif "configMap" in volume:
                got = await self.api.get("v1", "configmaps", namespace, volume["configMap"]["name"])
                data = {k: v.encode() for k, v in ((got or {}).get("data") or {}).items()}
            elif "emptyDir" not in volume:
                continue  # pod_run names the volume it cannot mount
            for key, value in data.items():
                (where / key).write_bytes(value)
                (where / key).chmod(0o600)
                if key == HMAC_KEY and "secret" in volume:
                    secret_path = str(where / key)
            out[volume["name"]] = str(where)
        return out, secret_path

    async def _lookups(
        self, body: Mapping[str, Any]
    ) -> tuple[containers.Lookup, containers.Lookup]:
        """Every Secret and ConfigMap key an env var of the pod names, read now."""
        namespace = body["metadata"].get("namespace", "default")
        wanted = {
            (kind, ref["name"])
            for c in body["spec"].get("containers", [])
            for e in c.get("env", [])
            for kind in ("secretKeyRef", "configMapKeyRef")
            if (ref := (e.get("valueFrom") or {}).get(kind))
        }
        got: dict[tuple[str, str], dict[str, str]] = {}
        for kind, name in wanted:
            plural = "secrets" if kind == "secretKeyRef" else "configmaps"
            data = ((await self.api.get("v1", plural, namespace, name)) or {}).get("data") or {}
            if kind == "secretKeyRef":
                data = {k: base64.b64decode(v).decode() for k, v in data.items()}
            got[kind, name] = data

        def lookup(kind: str) -> containers.Lookup:
            return lambda name, key: got.get((kind, name), {}).get(key)

        return lookup("secretKeyRef"), lookup("configMapKeyRef")

    async def _terminate(self, pod: Pod) -> None:
        """A deleted pod: unready now, preStop, SIGTERM, SIGKILL at the grace's end, then
        its finalizer goes."""
        run = pod.run
        for box in pod.boxes.values():
            box.probes = probes.Container()  # no more probes; not ready
        await self._write_status(pod, terminating=True)
        deadline = time.monotonic() + run.grace_s
        hooks = [
            b for b in pod.boxes.values() if b.process.pre_stop and b.child.proc.poll() is None
        ]
        await asyncio.gather(*(self._pre_stop(pod, b, deadline) for b in hooks))
        left = max(0.1, deadline - time.monotonic())
        await asyncio.to_thread(stop_children, [b.child for b in pod.boxes.values()], left)
        self.pods.pop(pod.uid, None)
        body = await self.api.get("v1", "pods", run.namespace, run.name)
        if body is not None:
            kept = [f for f in body["metadata"].get("finalizers", []) if f != FINALIZER]
            await self.api.patch(
                "v1", "pods", run.namespace, run.name, {"metadata": {"finalizers": kept}}
            )
        log.info("stopped pod %s/%s", run.namespace, run.name)

    async def _pre_stop(self, pod: Pod, box: Box, deadline: float) -> None:
        """The container's preStop, its output in the container's log (where `kubectl
        logs` would not show it, but a test can)."""
        env = _env(box.process.env)
        with open(box.child.log_path, "ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *box.process.pre_stop, env=env, stdout=log, stderr=log
            )
            try:
                await asyncio.wait_for(proc.wait(), max(0.1, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()

    # ------------------------------------------------------------------ running pods

    def _restart_exited(self, pod: Pod, now: float) -> None:
        for box in pod.boxes.values():
            why = box.probes.must_restart()
            exited = box.child.proc.poll()
            if why is None and exited is None:
                continue
            if not box.waiting:  # it just died or failed: kill, wait the back-off
                if exited is None:
                    stop_children([box.child], 1.0, signal.SIGKILL)
                    log.info("pod %s: %s: %s, restarting", pod.run.name, box.process.container, why)
                restart = next_restart(BACKOFF, box.attempt, box.ready_at, now)
                box.waiting, box.restart_at, box.attempt = (
                    "CrashLoopBackOff",
                    restart.at,
                    restart.attempt,
                )
                box.probes, box.ready_at = probes.Container(), None
                continue
            if now >= box.restart_at:
                spawn(box.child)
                box.restarts += 1
                box.waiting = ""
                box.probes = probes.Container.started(box.process.spec, now)

    def _probe(self, pod: Pod, now: float) -> None:
        for box in pod.boxes.values():
            if box.waiting:
                continue
            if box.ready_at is None and box.probes.ready:
                box.ready_at = now
            for probe in box.probes.due(now):
                kind = probe.rule.kind
                if kind in box.inflight:
                    continue
                box.inflight.add(kind)
                probe.next_at = now + probe.rule.period  # not again before it is due
                task = asyncio.ensure_future(self._run_probe(pod, box, probe))
                task.add_done_callback(functools.partial(_done, box.inflight, kind))

    async def _run_probe(self, pod: Pod, box: Box, probe: probes.Probe) -> None:
        rule, spec = probe.rule, box.process.spec
        ok = False
        try:
            async with asyncio.timeout(rule.timeout):
                ok = await self._attempt(pod, box, rule, spec)
        except (asyncio.TimeoutError, OSError, aiohttp.ClientError):
            ok = False
        if box.probes.probes.get(rule.kind) is probe:  # not a probe of a container since gone
            probe.record(ok, time.monotonic())

    async def _attempt(
        self, pod: Pod, box: Box, rule: probes.Rule, spec: Mapping[str, Any]
    ) -> bool:
        action = rule.action
        if "httpGet" in action:
            assert self._http is not None
            url = containers.probe_url(pod.run.address, spec, action)
            async with self._http.get(url, allow_redirects=False) as resp:
                return 200 <= resp.status < 400
        if "tcpSocket" in action:
            port = action["tcpSocket"]["port"]
            _, writer = await asyncio.open_connection(pod.run.address, int(port))
            writer.close()
            return True
        if "exec" in action:
            argv = containers.probe_exec(pod.run, box.process, action["exec"]["command"])
            proc = await asyncio.create_subprocess_exec(
                *argv, env=_env(box.process.env), stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                return await proc.wait() == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
        return False

    async def _write_status(self, pod: Pod, terminating: bool = False) -> None:
        ready = not terminating and all(
            b.probes.ready and not b.waiting for b in pod.boxes.values()
        )
        statuses: list[dict[str, Any]] = [
            {
                "name": name,
                "ready": not terminating and box.probes.ready and not box.waiting,
                "started": not box.waiting,
                "restartCount": box.restarts,
                "state": {"waiting": {"reason": box.waiting}} if box.waiting else {"running": {}},
            }
            for name, box in pod.boxes.items()
        ]
        if (ready, statuses) == pod.written:
            return
        changed = ready != pod.ready or pod.written is None
        pod.ready, pod.written = ready, (ready, statuses)
        flag = "True" if ready else "False"
        status: dict[str, Any] = {
            "phase": "Running",
            "podIP": pod.run.address,
            "hostIP": pod.run.address,
            "containerStatuses": statuses,
        }
        if changed:
            status["conditions"] = [
                {"type": "Ready", "status": flag, "lastTransitionTime": now_rfc3339()},
                {"type": "ContainersReady", "status": flag, "lastTransitionTime": now_rfc3339()},
            ]
        await self.api.patch(
            "v1", "pods", pod.run.namespace, pod.run.name, {"status": status}, sub="status"
        )


def _done(inflight: set[str], kind: str, _: object) -> None:
    inflight.discard(kind)


def _env(env: Mapping[str, str]) -> dict[str, str]:
    """A container's env over this host's (its PATH, certificates), without the host's
    own disagg and UCX settings."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DISAGG_", "UCX_TLS"))}
    return {**base, **env}


def _failed(why: str) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "reason": "LocalKubelet",
        "message": why,
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now_rfc3339()}],
    }
