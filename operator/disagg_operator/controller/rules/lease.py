"""Leader-election rules on a ``coordination.k8s.io/v1`` Lease: who may hold it, and what to write.

Under :mod:`disagg_operator.controller.election.leader` (which does the API calls and the
waiting). The semantics are client-go's ``leaderelection`` package, so the operator behaves
like any controller-runtime manager sharing the same kind of lock. A lease is valid by this
candidate's own monotonic clock from when it first saw the record, never the stored
``renewTime``, because clock skew between nodes must not make two leaders; every write
carries the ``resourceVersion`` it was computed from, so of two writers one gets 409.
The rules and timings: docs/operator.md (High availability).
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from typing import Any

API_VERSION = "coordination.k8s.io/v1"
KIND = "Lease"
JITTER = 1.2  # client-go's JitterFactor: the renew deadline must fit a retry with jitter


@dataclasses.dataclass(frozen=True)
class ElectionSettings:
    """Where the Lease lives and the three durations (seconds) of the election."""

    name: str = "disagg-operator"
    namespace: str = ""
    lease_duration_s: int = 10
    renew_deadline_s: float = 8.0
    retry_period_s: float = 2.0

    def problems(self) -> list[str]:
        """What is wrong with these settings, each naming the flag and the fix."""
        found = []
        if not self.namespace:
            found.append(
                "--lease-namespace: no namespace for the Lease; pass it or set $POD_NAMESPACE "
                "(the chart sets it from the downward API)"
            )
        if self.lease_duration_s < 1:
            found.append("--lease-duration-seconds: must be at least 1")
        if self.retry_period_s <= 0:
            found.append("--retry-period-seconds: must be above 0")
        if self.renew_deadline_s >= self.lease_duration_s:
            found.append(
                f"--renew-deadline-seconds {self.renew_deadline_s:g} must be below "
                f"--lease-duration-seconds {self.lease_duration_s}: the leader must stop "
                "before a standby may take over"
            )
        if self.renew_deadline_s <= JITTER * self.retry_period_s:
            found.append(
                f"--renew-deadline-seconds {self.renew_deadline_s:g} must be above "
                f"{JITTER:g} x --retry-period-seconds {self.retry_period_s:g}: at least one "
                "renewal must fit"
            )
        return found


@dataclasses.dataclass(frozen=True)
class Record:
    """The Lease's spec, as stored (empty holder: nobody holds it)."""

    holder: str = ""
    duration_s: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    transitions: int = 0


@dataclasses.dataclass(frozen=True)
class Observation:
    """A record and when (this candidate's monotonic clock) it was first seen as it is."""

    record: Record
    seen_at: float


def micro_time(at: datetime.datetime) -> str:
    """A ``MicroTime`` as the API server stores it: RFC 3339, microseconds, UTC."""
    return at.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read(body: Mapping[str, Any]) -> Record:
    """The record of a Lease object; missing fields read as empty (a hand-made Lease)."""
    spec = body.get("spec") or {}
    return Record(
        holder=str(spec.get("holderIdentity") or ""),
        duration_s=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=str(spec.get("acquireTime") or ""),
        renew_time=str(spec.get("renewTime") or ""),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


def observe(previous: Observation | None, record: Record, now: float) -> Observation:
    """Keep ``seen_at`` while the record is unchanged; restart it on any change."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, now)


def expires_at(seen: Observation) -> float:
    """When (monotonic) the observed holder's lease ends unless renewed."""
    return seen.seen_at + seen.record.duration_s


def valid(seen: Observation, now: float) -> bool:
    """Whether someone holds the lease by this candidate's own clock."""
    return bool(seen.record.holder) and expires_at(seen) > now


def may_write(seen: Observation | None, me: str, now: float) -> bool:
    """Whether ``me`` may acquire or renew: absent, released, expired, or already mine."""
    return seen is None or seen.record.holder == me or not valid(seen, now)


def claim(current: Record | None, me: str, duration_s: int, wall: str) -> Record:
    """The record ``me`` writes to acquire (transitions + 1) or renew (same acquire time)."""
    if current is not None and current.holder == me:
        return dataclasses.replace(current, duration_s=duration_s, renew_time=wall)
    transitions = current.transitions + 1 if current is not None else 0
    return Record(me, duration_s, wall, wall, transitions)


def released(current: Record, wall: str) -> Record:
    """The record a leader writes on a clean stop: no holder, expired at once."""
    return Record("", 1, wall, wall, current.transitions)


def lease_body(
    name: str, namespace: str, record: Record, resource_version: str = ""
) -> dict[str, Any]:
    """The Lease object to create (no resourceVersion) or replace (with the one read)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version:
        meta["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "leaseDurationSeconds": record.duration_s,
        "leaseTransitions": record.transitions,
    }
    if record.holder:
        spec["holderIdentity"] = record.holder
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time:
        spec["renewTime"] = record.renew_time
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}
