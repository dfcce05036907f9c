"""The local kubelet with an API server of its own: one manifest's rendered objects held by
the API server stand-in (:mod:`disagg_tools.emulator`, in this process) and their pods run
by the kubelet and its controllers (:func:`.run.running`), with no operator. The objects
are created once, as rendered, as a cluster holds them after the operator's first sync;
the kubelet then starts, probes and restarts the pods, the controllers keep the Services'
endpoints and names, and a Deployment's pods (the router's) are made from its template.

I/O layer, on a thread of its own with its own event loop, so a caller that blocks (a
command, a test, a benchmark) drives it with plain calls: :meth:`Standalone.create`,
:meth:`Standalone.get`, :meth:`Standalone.pods`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import kmock

from disagg_operator.api import API_VERSION, PLURAL
from disagg_operator.render import crd
from disagg_tools.emulator.server import Emulator
from disagg_tools.local.children import Child
from disagg_tools.local.kubelet import run as kubelet_run
from disagg_tools.local.kubelet.node import Kubelet, NodeConfig
from disagg_tools.local.kubelet.rules.containers import PodRun

T = TypeVar("T")
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
# what a standalone run holds, by kind: its API version and resource
RESOURCES = {
    "DisaggregatedDeployment": (API_VERSION, PLURAL),
    "Secret": ("v1", "secrets"),
    "ConfigMap": ("v1", "configmaps"),
    "Service": ("v1", "services"),
    "Pod": ("v1", "pods"),
    "Deployment": ("apps/v1", "deployments"),
}
START_S = 30.0  # the API server and the kubelet start in well under a second


class StandaloneError(RuntimeError):
    """The standalone kubelet could not start or answer; the message says why."""


class Standalone:
    """The API server stand-in and the local kubelet on a thread (module docstring);
    ``workdir`` holds the pods' logs and volumes, ``config`` is the kubelet's."""

    def __init__(self, workdir: Path, config: NodeConfig | None = None) -> None:
        self.workdir, self.config = workdir, config or NodeConfig()
        self.url = ""
        self.net = ""  # the pod network the kubelet holds (127.0.N.)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._graceful = False
        self._hurry = threading.Event()
        self._stop: asyncio.Event | None = None
        self._kubelet: Kubelet | None = None
        self._thread = threading.Thread(target=self._main, name="standalone-kubelet", daemon=True)

    def __enter__(self) -> Standalone:
        return self.start()

    def start(self) -> Standalone:
        """Start the API server and the kubelet; returns once both serve."""
        self._thread.start()
        if not self._ready.wait(START_S) or self._failed is not None:
            self.close()
            raise StandaloneError(f"the local kubelet did not start: {self._failed!r}")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self, graceful: bool = False, hurry: threading.Event | None = None) -> None:
        """Stop every pod, the kubelet and the API server; returns once all have ended.
        ``graceful``: delete the pods first, as a namespace's deletion does (each one's
        preStop, then SIGTERM, within its grace; ``hurry``, once set, cuts it short); else
        every container gets SIGTERM at once and SIGKILL 2 s later (the kubelet stopping)."""
        self._graceful = graceful
        if hurry is not None:
            self._hurry = hurry
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()

    # ------------------------------------------------------------------ calls

    def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj`` as a client's POST (the API server's admission: defaults, schema,
        CEL); the object as stored (its uid). KeyError for a kind a standalone run does not
        hold (:data:`RESOURCES`)."""
        version, plural = RESOURCES[obj["kind"]]
        namespace = obj["metadata"].get("namespace", "default")
        kubelet = self._kubelet
        assert kubelet is not None
        created: dict[str, Any] = self._await(kubelet.api.create(version, plural, namespace, obj))
        return created

    def get(self, kind: str, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """The object as the API server holds it now (its status), None when there is none."""
        version, plural = RESOURCES[kind]
        kubelet = self._kubelet
        assert kubelet is not None
        found: dict[str, Any] | None = self._await(
            kubelet.api.get(version, plural, namespace, name)
        )
        return found

    def pods(self) -> dict[str, PodRun]:
        """The pods the kubelet runs now, by name: each one's processes and address."""
        kubelet = self._kubelet
        assert kubelet is not None
        return self._call(lambda: {p.run.name: p.run for p in kubelet.pods.values()})

    def failed(self) -> list[str]:
        """Why each pod that cannot run here was refused (the kubelet failed it)."""
        kubelet = self._kubelet
        assert kubelet is not None
        return self._call(lambda: list(kubelet.failed.values()))

    def children(self) -> dict[str, dict[str, Child]]:
        """Each running pod's containers, by pod and container name: the process of each
        (a restart replaces its ``proc``), its command, env and log."""
        kubelet = self._kubelet
        assert kubelet is not None
        return self._call(
            lambda: {
                p.run.name: {name: box.child for name, box in p.boxes.items()}
                for p in kubelet.pods.values()
            }
        )

    def pid(self, pod: str, container: str) -> int | None:
        """The process id of a running container's newest instance (None: not running)."""
        kubelet = self._kubelet
        assert kubelet is not None

        def find() -> int | None:
            for p in kubelet.pods.values():
                box = p.boxes.get(container) if p.run.name == pod else None
                if box is not None and box.running:
                    return int(box.child.proc.pid)
            return None

        return self._call(find)

    def _call(self, fn: Callable[[], T]) -> T:
        """``fn`` on the loop's thread (the API server and the kubelet are not shared
        across threads), its result or its exception here."""

        async def run() -> T:
            return fn()

        return self._await(run())

    def _await(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._failed is not None or not self._thread.is_alive():
            coro.close()
            raise StandaloneError(f"the local kubelet has stopped: {self._failed!r}")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(START_S)

    # ------------------------------------------------------------------ the thread

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:  # said by __enter__ or the next call
            self._failed = e
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with Emulator() as emulator, kmock.Server(emulator):
            emulator.put_object(CRDS, crd.build())  # as `kubectl apply -f crds/` would
            self.url = str(emulator.url).rstrip("/")
            async with kubelet_run.running(self.url, self.workdir, self.config) as kubelet:
                self._kubelet, self.net = kubelet, kubelet.net
                self._ready.set()
                await self._stop.wait()
                if self._graceful:
                    await _deleted(kubelet, self._hurry)


async def _deleted(kubelet: Kubelet, hurry: threading.Event) -> None:
    """Delete every Deployment and pod and wait (within the longest grace, or until
    ``hurry``) while the kubelet runs each one's preStop and stops it, as a namespace's
    deletion would; the kubelet's own stop ends what is left."""
    for version, plural in (("apps/v1", "deployments"), ("v1", "pods")):
        for obj in await kubelet.api.list(version, plural):
            meta = obj["metadata"]
            await kubelet.api.delete(version, plural, meta.get("namespace", ""), meta["name"])
    longest = max((p.run.grace_s for p in kubelet.pods.values()), default=0.0)
    deadline = asyncio.get_running_loop().time() + longest + 5.0
    while kubelet.pods and not hurry.is_set() and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)
