"""What the rollout planners see of a deployment's instances (pods, or LeaderWorkerSets
where an instance spans pods) and of each role's strategy.

:class:`PodView` is one observed pod as the planners need it
(:func:`views` builds them from pod bodies); :class:`Budget` a role's strategy resolved to
pod counts. :mod:`.rollout` (a role's in-place roll, and the plan of a sync) and
:mod:`.kvroll` (a new KV revision) both read them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from disagg_operator.api import (
    LABEL_KV_REVISION,
    LABEL_REVISION,
    LABEL_ROLE,
    ROLES,
    SPEC_HASH,
    RolloutStrategy,
    kinds,
)
from disagg_operator.contracts import lws
from disagg_operator.derive.scaling import resolve, surge


@dataclass(frozen=True)
class Budget:
    """A role's resolved strategy: ``surge`` pods above replicas, ``unavailable`` below;
    ``recreate``: old pods go first, new ones start once they are gone (no surge, and
    the whole role may be unavailable meanwhile); ``wide``: the surge of a KV change
    that routers reach one revision at a time (maxSurge unset: the room it needs,
    :func:`~disagg_operator.derive.scaling.surge`; None: ``surge``)."""

    replicas: int
    surge: int
    unavailable: int
    recreate: bool = False
    wide: int | None = None

    @classmethod
    def of(cls, replicas: int, strategy: RolloutStrategy) -> Budget:
        if strategy.strategy == "Recreate":
            return cls(replicas, 0, replicas, recreate=True)
        unavailable = resolve(strategy.max_unavailable, replicas, round_up=False)
        extra = surge(strategy, replicas)
        if extra == 0 and unavailable == 0:
            unavailable = 1  # refused by validation; never deadlock here
        return cls(replicas, extra, unavailable, wide=surge(strategy, replicas, one_revision=True))

    def one_revision(self) -> Budget:
        """This budget for a KV change that routers reach one revision at a time."""
        return self if self.wide is None else replace(self, surge=self.wide)

    @property
    def min_ready(self) -> int:
        return max(0, self.replicas - self.unavailable)

    @property
    def batch(self) -> int:
        """New pods one step of a KV roll adds: the surge, or the pods that may be
        missing where there is no surge (they make the room)."""
        return self.surge or max(1, self.unavailable)


@dataclass(frozen=True)
class PodView:
    """What the planner needs of one observed pod."""

    name: str
    role: str
    index: int | None  # None: not named <deployment>-<role>-<i>
    kv: str
    revision: str  # the role template's (disagg.dev/revision)
    current: bool
    ready: bool
    terminating: bool
    busy: float = 0.0  # requests in flight when last read (the autoscaler's; 0: unknown)


def is_ready(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's Ready condition is True (a pod with no status yet is not); for a
    LeaderWorkerSet (an instance spanning pods), whether its groups are all ready (LWS
    counts a group ready when every pod of it is)."""
    status = pod.get("status") or {}
    if pod.get("kind") == lws.KIND:
        wanted = (pod.get("spec") or {}).get("replicas", 1)
        return int(status.get("readyReplicas") or 0) >= max(1, int(wanted))
    conditions = status.get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def instances(observed: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The instances among a deployment's observed children (the pods a LeaderWorkerSet
    makes are its, not the deployment's: they are not among them)."""
    return [dict(o) for o in observed if o.get("kind") in kinds.INSTANCE_KINDS]


def index_of(deployment: str, role: str, pod_name: str) -> int | None:
    """``i`` of a pod named ``<deployment>-<role>-<i>``; None for any other name."""
    prefix = f"{deployment}-{role}-"
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() and str(int(tail)) == tail else None


def views(
    deployment: str,
    pods: Sequence[Mapping[str, Any]],
    current_hash: Callable[[str, int], str],
    busy: Mapping[str, float] | None = None,
) -> list[PodView]:
    """PodViews of observed pods; ``current_hash(role, i)``: the spec-hash render gives;
    ``busy``: requests in flight by pod name, as last read (absent: 0)."""
    out = []
    for pod in pods:
        meta = pod.get("metadata", {})
        role = meta.get("labels", {}).get(LABEL_ROLE, "")
        index = index_of(deployment, role, meta["name"]) if role in ROLES else None
        spec_hash = meta.get("annotations", {}).get(SPEC_HASH)
        current = index is not None and spec_hash == current_hash(role, index)
        out.append(
            PodView(
                name=meta["name"],
                role=role,
                index=index,
                kv=meta.get("labels", {}).get(LABEL_KV_REVISION, ""),
                revision=meta.get("labels", {}).get(LABEL_REVISION, ""),
                current=current,
                ready=is_ready(pod),
                terminating=bool(meta.get("deletionTimestamp")),
                busy=(busy or {}).get(meta["name"], 0.0),
            )
        )
    return out


def lowest_free(taken: set[int], count: int) -> list[int]:
    """The ``count`` lowest indices not in ``taken``."""
    out: list[int] = []
    i = 0
    while len(out) < count:
        if i not in taken:
            out.append(i)
        i += 1
    return out
