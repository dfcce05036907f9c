"""The operator benchmark's kubelet and its view of a deployment's readiness.

Benchmark helper (acts on an in-process API emulator, no I/O of its own). The converge,
rollout and sizing phases all need pods to turn Ready once they exist and to know when a
deployment says Ready=True; this is the one place that does both.
"""

from __future__ import annotations

import time
from typing import Any

from disagg_operator.api import API_VERSION, PLURAL

DD_KEY = f"{API_VERSION}/{PLURAL}"


class Kubelet:
    """Marks each new pod in ``namespace`` (None: all) Ready ``ready_after`` seconds after
    it first appears, one :meth:`tick` at a time. Pods are told apart by uid (a rollout
    recreates names) and looked for only when the emulator changed: scanning thousands of
    pods every tick would cost the CPU the operator is measured on."""

    def __init__(self, emu: Any, namespace: str | None = None) -> None:
        self.emu, self.namespace = emu, namespace
        self.ready_after = 0.0  # seconds a new pod takes to become Ready (pod start-up)
        self._revision = -1
        self._done: set[str] = set()
        self._waiting: dict[str, tuple[str, str, float]] = {}  # uid → (ns, name, first seen)

    def tick(self) -> None:
        now = time.monotonic()
        if self.emu.revision != self._revision:
            self._revision = self.emu.revision
            for pod in self.emu.objects_of("v1/pods", self.namespace):
                meta = pod["metadata"]
                uid = meta["uid"]
                if uid not in self._done and uid not in self._waiting:
                    self._waiting[uid] = (meta["namespace"], meta["name"], now)
        for uid, (namespace, name, seen) in list(self._waiting.items()):
            if now - seen >= self.ready_after:
                del self._waiting[uid]
                self._done.add(uid)
                if self.emu.find("v1/pods", namespace, name) is not None:
                    self.emu.set_pod_ready(namespace, name)


def deployment_ready(emu: Any, namespace: str, name: str) -> bool:
    """Whether DisaggregatedDeployment ``name`` says Ready=True."""
    status = (emu.find(DD_KEY, namespace, name) or {}).get("status") or {}
    conditions = status.get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
