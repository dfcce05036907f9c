"""A container's probes as the kubelet runs them, ported from Kubernetes 1.36
``pkg/kubelet/prober``: one :class:`Worker` per probe (``worker.go`` ``doProbe``: initial
results, the initial delay, the startup gate, the thresholds, the hold after a liveness or
startup verdict), what the pod's status says of them (``prober_manager.go``
``UpdatePodStatus`` and ``isContainerStarted``) and when they ask for a kill
(``kuberuntime_manager.go`` ``computePodActions``).

The kubelet (:mod:`..node`) runs each probe and passes its result and the
time in. A worker lives as long as its pod, across the container's restarts (its ticker
keeps its phase); a new container instance puts its result back to the initial one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SUCCESS, FAILURE, UNKNOWN = "Success", "Failure", "Unknown"
STARTUP, LIVENESS, READINESS = "startupProbe", "livenessProbe", "readinessProbe"
KINDS = (STARTUP, LIVENESS, READINESS)
INITIAL = {READINESS: FAILURE, LIVENESS: SUCCESS, STARTUP: UNKNOWN}  # newWorker
ACTIONS = ("httpGet", "tcpSocket", "exec", "grpc")
# the API server's defaults for a field left 0 or unset (SetDefaults_Probe)
DEFAULTS = {
    "initialDelaySeconds": 0,
    "periodSeconds": 10,
    "timeoutSeconds": 1,
    "successThreshold": 1,
    "failureThreshold": 3,
}


@dataclass(frozen=True)
class Rule:
    """One probe of a container spec, defaulted as the API server stores it."""

    kind: str
    action: Mapping[str, Any]  # httpGet, tcpSocket, exec or grpc, as written
    delay: int = 0
    period: int = 10
    timeout: int = 1
    successes: int = 1
    failures: int = 3

    @classmethod
    def of(cls, kind: str, probe: Mapping[str, Any]) -> Rule:
        """The probe as the API server would have stored it; ValueError naming the field
        where the API server would have refused the pod."""
        actions = [k for k in ACTIONS if k in probe]
        if len(actions) != 1:
            raise ValueError(f"{kind}: must have exactly one of {', '.join(ACTIONS)}")
        got = {}
        for name, default in DEFAULTS.items():
            value = probe.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{kind}.{name}: must be a whole number >= 0, got {value!r}")
            got[name] = value or default
        if kind != READINESS and got["successThreshold"] != 1:
            raise ValueError(f"{kind}.successThreshold: must be 1")
        return cls(
            kind, {actions[0]: probe[actions[0]]}, got["initialDelaySeconds"],
            got["periodSeconds"], got["timeoutSeconds"], got["successThreshold"],
            got["failureThreshold"],
        )  # fmt: skip


@dataclass(frozen=True)
class Seen:
    """What a worker reads of its container in the kubelet's pod status."""

    instance: str = ""  # the container ID; "" while there is none
    running: bool = False
    started_at: float = 0.0  # state.running.startedAt
    started: bool = False  # containerStatuses[].started
    exited: bool = False  # state.terminated
    restarts: bool = True  # the exited container will be started again (restart policy)
    pod_done: bool = False  # phase Succeeded or Failed
    deleting: bool = False  # the pod has a deletionTimestamp


@dataclass
class Worker:
    """One probe worker: its results-manager entry, its run of equal results, its ticker."""

    rule: Rule
    next_at: float  # the ticker's next tick
    origin: float  # the ticker's phase: ticks at origin + k · period
    instance: str = ""  # the container its result is for
    result: str | None = None  # the results manager's entry (None: none)
    last: str | None = None
    run: int = 0  # how many times in a row ``last`` came
    on_hold: bool = False  # no probing until a new container
    gone: bool = False  # doProbe said stop: the worker exited, its entry went with it

    def prepare(self, seen: Seen, now: float) -> bool:
        """``doProbe`` up to the probe: whether to run it now. May set the result (a new
        container, one not running, a pod being deleted) or end the worker."""
        if seen.pod_done:
            return self._stop()
        if not seen.instance:
            return False  # no container yet: wait
        if seen.instance != self.instance:
            self.instance, self.result, self.on_hold = seen.instance, INITIAL[self.rule.kind], False
        if self.on_hold:
            return False
        if not seen.running:
            self.result = FAILURE
            return False if (not seen.exited or seen.restarts) else self._stop()
        if seen.deleting and self.rule.kind != READINESS:
            self.result = SUCCESS  # a quiet shutdown
            return self._stop()
        if int(now - seen.started_at) < self.rule.delay:  # Go truncates to whole seconds
            return False
        return seen.started != (self.rule.kind == STARTUP)

    def record(self, result: str) -> bool:
        """``doProbe`` after the probe: thresholds and the hold; whether the entry changed."""
        self.last, self.run = result, (self.run + 1 if result == self.last else 1)
        needed = self.rule.failures if result == FAILURE else self.rule.successes
        if self.run < needed:
            return False
        changed, self.result = self.result != result, result
        if (self.rule.kind == LIVENESS and result == FAILURE) or self.rule.kind == STARTUP:
            self.on_hold, self.run = True, 0
        return changed

    def _stop(self) -> bool:
        self.gone = True
        return False

    def due(self, now: float) -> bool:
        return not self.gone and now >= self.next_at

    def ticked(self, now: float) -> None:
        """A run began at ``now``: the next is the ticker's next tick."""
        self.next_at = self.origin + self.rule.period * (
            math.floor((now - self.origin) / self.rule.period) + 1
        )

    def trigger(self, now: float) -> None:
        """A manual run (``manualTriggerCh``): now, and the ticker restarts from it."""
        self.origin = self.next_at = now

    def holds(self, instance: str) -> str | None:
        """The results manager's entry for ``instance``."""
        return self.result if not self.gone and self.instance == instance else None


@dataclass
class Probes:
    """A container's probe workers (absent kinds have none) and what they say."""

    workers: dict[str, Worker] = field(default_factory=dict)

    @classmethod
    def of(cls, spec: Mapping[str, Any], origin: float) -> Probes:
        """The workers of a container spec, added with its pod at ``origin``: their first
        doProbe runs then, before the container exists (``AddPod`` comes before the start
        in a pod sync), and finds nothing to probe; the next is a period later."""
        workers = {}
        for kind in KINDS:
            if spec.get(kind) is not None:
                rule = Rule.of(kind, spec[kind])
                workers[kind] = Worker(rule, next_at=origin + rule.period, origin=origin)
        return cls(workers)

    def _live(self, kind: str) -> Worker | None:
        worker = self.workers.get(kind)
        return worker if worker is not None and not worker.gone else None

    def started(self, seen: Seen) -> bool:
        """``isContainerStarted``: running, and its startup probe passed (or it has none)."""
        if not seen.running:
            return False
        startup = self._live(STARTUP)
        if startup is None:
            return True
        return startup.holds(seen.instance) == SUCCESS

    def ready(self, seen: Seen) -> bool:
        """``UpdatePodStatus``: started and running, and its readiness probe passed (or
        it has no readiness worker)."""
        if not self.started(seen):
            return False
        readiness = self._live(READINESS)
        return readiness is None or readiness.holds(seen.instance) == SUCCESS

    def sync(self, seen: Seen, now: float) -> None:
        """A pod sync: a started container not yet ready has its readiness probe run now."""
        readiness = self._live(READINESS)
        if readiness is not None and self.started(seen) and not self.ready(seen):
            readiness.trigger(now)

    def kill_reason(self, seen: Seen) -> str | None:
        """Why the running container must be killed (``computePodActions``)."""
        for kind, why in ((LIVENESS, "liveness"), (STARTUP, "startup")):
            worker = self._live(kind)
            if worker is not None and worker.holds(seen.instance) == FAILURE:
                return f"failed {why} probe"
        return None
