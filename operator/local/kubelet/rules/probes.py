"""A container's probes as a kubelet runs them: when each is due, what its results mean.

Kubernetes' rules, from the Pod API's Probe fields:

- ``initialDelaySeconds`` after the container starts, then every ``periodSeconds``
  (default 10); a probe that takes longer than ``timeoutSeconds`` (default 1) failed;
- ``successThreshold`` (default 1) consecutive successes make it pass, ``failureThreshold``
  (default 3) consecutive failures make it fail;
- a startup probe, while it has not passed, holds the other two; once it passes it is
  never run again; its failure restarts the container, as a liveness failure does;
- readiness starts failed (a new container is not Ready until its probe passes); a
  container without a readiness probe is Ready once started.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("startupProbe", "livenessProbe", "readinessProbe")


@dataclass(frozen=True)
class Rule:
    """One probe of a container spec, with Kubernetes' defaults filled in."""

    kind: str
    action: Mapping[str, Any]  # httpGet, tcpSocket or exec, as written
    delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    successes: int = 1
    failures: int = 3

    @classmethod
    def of(cls, kind: str, probe: Mapping[str, Any]) -> Rule:
        action = {k: probe[k] for k in ("httpGet", "tcpSocket", "exec", "grpc") if k in probe}
        return cls(
            kind,
            action,
            float(probe.get("initialDelaySeconds", 0)),
            float(probe.get("periodSeconds", 10)),
            float(probe.get("timeoutSeconds", 1)),
            int(probe.get("successThreshold", 1)),
            int(probe.get("failureThreshold", 3)),
        )


@dataclass
class Probe:
    """One probe's running state."""

    rule: Rule
    next_at: float
    passing: bool  # the probe's verdict: readiness starts failed, liveness passed
    ok_run: int = 0
    failed_run: int = 0
    done: bool = False  # a startup probe that passed is never run again

    def due(self, now: float) -> bool:
        return not self.done and now >= self.next_at

    def record(self, ok: bool, now: float) -> bool:
        """One result; whether the verdict flipped."""
        self.next_at = now + self.rule.period
        self.ok_run, self.failed_run = (self.ok_run + 1, 0) if ok else (0, self.failed_run + 1)
        before = self.passing
        if ok and self.ok_run >= self.rule.successes:
            self.passing = True
            self.done = self.rule.kind == "startupProbe"
        elif not ok and self.failed_run >= self.rule.failures:
            self.passing = False
        return before != self.passing


@dataclass
class Container:
    """A running container's probes: what the kubelet asks each tick."""

    probes: dict[str, Probe] = field(default_factory=dict)

    @classmethod
    def started(cls, spec: Mapping[str, Any], now: float) -> Container:
        probes = {}
        for kind in KINDS:
            if kind in spec:
                rule = Rule.of(kind, spec[kind])
                probes[kind] = Probe(rule, now + rule.delay, passing=kind == "livenessProbe")
        return cls(probes)

    def due(self, now: float) -> list[Probe]:
        """The probes to run now (a startup probe that has not passed holds the others)."""
        startup = self.probes.get("startupProbe")
        if startup is not None and not startup.passing:
            return [startup] if startup.due(now) else []
        return [p for k, p in self.probes.items() if k != "startupProbe" and p.due(now)]

    @property
    def ready(self) -> bool:
        startup = self.probes.get("startupProbe")
        if startup is not None and not startup.passing:
            return False
        readiness = self.probes.get("readinessProbe")
        return readiness.passing if readiness is not None else True

    def must_restart(self) -> str | None:
        """Why the container must be restarted (a failed liveness or startup probe)."""
        for kind in ("startupProbe", "livenessProbe"):
            probe = self.probes.get(kind)
            if probe is not None and probe.failed_run >= probe.rule.failures and not probe.done:
                return f"{kind} failed {probe.failed_run} times"
        return None
