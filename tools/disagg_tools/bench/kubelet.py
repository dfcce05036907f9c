"""The operator benchmark's kubelet and its view of a deployment's readiness.

Benchmark helper (acts on an in-process API emulator, no I/O of its own). The converge,
rollout and sizing phases all need pods to turn Ready once they exist, Deployments (the
router's) to roll out, and to know when a deployment says Ready=True; this is the one
place that does all three. With ``terminate_after`` set, pods it saw start also take that
long to go once deleted (their grace period: a kubelet runs the preStop first), so the
operator sees terminating pods as it would in a cluster.
"""

from __future__ import annotations

import time
from typing import Any

from disagg_operator.api import API_VERSION, PLURAL
from disagg_operator.render import crd

DD_KEY = f"{API_VERSION}/{PLURAL}"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def serve_crd(emu: Any) -> None:
    """Create the DisaggregatedDeployment CRD in the emulator, through its CRD admission
    (kube-apiserver's rules), as ``kubectl apply -f crds/`` does on a cluster."""
    emu.put_object(CRDS, crd.build())


GRACE = "disagg.dev/bench-kubelet"  # the finalizer that holds a deleted pod for its grace


class Kubelet:
    """Marks each new pod in ``namespace`` (None: all) Ready ``ready_after`` seconds after
    it first appears, one :meth:`tick` at a time, and rolls out Deployments at once. Pods
    are told apart by uid (a rollout recreates names) and looked for only when the
    emulator changed: scanning thousands of pods every tick would cost the CPU the
    operator is measured on."""

    def __init__(self, emu: Any, namespace: str | None = None) -> None:
        self.emu, self.namespace = emu, namespace
        self.ready_after = 0.0  # seconds a new pod takes to become Ready (pod start-up)
        self.terminate_after: float | None = None  # a deleted pod's grace (None: none)
        self._revision = -1
        self._done: set[str] = set()
        self._waiting: dict[str, tuple[str, str, float]] = {}  # uid → (ns, name, first seen)
        self._going: dict[str, tuple[str, str, float]] = {}  # uid → (ns, name, deleted at)

    def tick(self) -> None:
        now = time.monotonic()
        if self.emu.revision != self._revision:
            self._revision = self.emu.revision
            self._look(now)
            self.emu.roll_out_deployments(self.namespace)
        for uid, (namespace, name, seen) in list(self._waiting.items()):
            if now - seen >= self.ready_after:
                del self._waiting[uid]
                self._done.add(uid)
                if self.emu.find("v1/pods", namespace, name) is not None:
                    self.emu.set_pod_ready(namespace, name)
        for uid, (namespace, name, since) in list(self._going.items()):
            if now - since >= (self.terminate_after or 0.0):
                del self._going[uid]
                self._release(namespace, name)

    def _look(self, now: float) -> None:
        for pod in self.emu.objects_of("v1/pods", self.namespace):
            meta = pod["metadata"]
            uid = meta["uid"]
            if uid not in self._done and uid not in self._waiting:
                self._waiting[uid] = (meta["namespace"], meta["name"], now)
                if self.terminate_after is not None:
                    self._hold(meta["namespace"], meta["name"])
            if meta.get("deletionTimestamp") and uid not in self._going:
                self._going[uid] = (meta["namespace"], meta["name"], now)

    def _hold(self, namespace: str, name: str) -> None:
        pod = self.emu.find("v1/pods", namespace, name)
        meta = {**pod["metadata"], "finalizers": [*pod["metadata"].get("finalizers", []), GRACE]}
        self.emu.put_object("v1/pods", {**pod, "metadata": meta})

    def _release(self, namespace: str, name: str) -> None:
        pod = self.emu.find("v1/pods", namespace, name)
        if pod is None:
            return
        kept = [f for f in pod["metadata"].get("finalizers", []) if f != GRACE]
        self.emu.put_object("v1/pods", {**pod, "metadata": {**pod["metadata"], "finalizers": kept}})


def deployment_ready(emu: Any, namespace: str, name: str) -> bool:
    """Whether DisaggregatedDeployment ``name`` says Ready=True."""
    status = (emu.find(DD_KEY, namespace, name) or {}).get("status") or {}
    conditions = status.get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
