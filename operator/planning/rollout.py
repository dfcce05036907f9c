"""The rollout planner: observed pods + the spec's revisions → this sync's pod writes.

Pure layer (the LWS DisaggregatedSet planner's shape: no cluster needed to test it).
:func:`plan` takes every observed pod of a deployment, the KV revision the routing objects
select now, and per role the replicas, the strategy and which pod a given index should be;
it returns which KV revision routing selects after this sync, which indices to create and
which pods to delete. Run it again after those writes land: it is level-triggered.

Terms, per role: ``R`` replicas, ``S`` maxSurge (percent of R rounded up), ``U``
maxUnavailable (rounded down; when both are 0 a Deployment would never progress, so
validation refuses it and ``U = 1`` here). A pod is *current* when its spec-hash equals
the pod render gives its index now; ``T`` is the spec's KV revision (:mod:`.kvkey`).

1. Routing. Routers (the disagg proxy on the role Services, llm-d's EPP on the
   InferencePool) pick a prefill and a decode independently, so one KV revision is
   routable at a time. It stays the routed one ``X`` until revision ``T`` can carry the
   load: in every role with ``R > 0``, current ready pods of ``T`` ≥ max(1, R - U). It is
   ``T`` at once when nothing is routed yet or ``X`` has no live pod left.
2. While ``X ≠ T`` is routed, ``T``'s pods are created as whole pairs of pools: R of each
   role at once (traffic cannot move to a half revision, and ``X`` keeps serving every
   request meanwhile, so availability is not at stake and maxSurge does not bound it);
   ``X``'s pods stay untouched.
3. Once ``T`` is routed, pods of every other revision are deleted: nothing routes to them
   any more and their preStop drains what they still hold. Pods of a revision that is
   neither routed nor wanted (a change reverted mid-way) are deleted at once.
4. Within the routed revision, a Deployment's rolling update: ``create = min(R - current,
   R + S - total)`` new pods (``total`` counts terminating pods too: they still hold
   their node's resources), at the lowest free indices; old pods are deleted unready
   first, then ready ones while ``ready - deleted ≥ R - U``; current pods beyond ``R``
   (a scale-down) go unready first, then the highest index. The operator cannot see
   which ready pod is idle; the preStop drain covers the work in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from disagg_operator.api import (
    LABEL_KV_REVISION,
    LABEL_REVISION,
    LABEL_ROLE,
    ROLES,
    SPEC_HASH,
    RolloutStrategy,
)
from disagg_operator.derive.scaling import resolve


@dataclass(frozen=True)
class Budget:
    """A role's resolved strategy: ``surge`` pods above replicas, ``unavailable`` below."""

    replicas: int
    surge: int
    unavailable: int

    @classmethod
    def of(cls, replicas: int, strategy: RolloutStrategy) -> Budget:
        surge = resolve(strategy.max_surge, replicas, round_up=True)
        unavailable = resolve(strategy.max_unavailable, replicas, round_up=False)
        if surge == 0 and unavailable == 0:
            unavailable = 1  # refused by validation; never deadlock here
        return cls(replicas, surge, unavailable)

    @property
    def min_ready(self) -> int:
        return max(0, self.replicas - self.unavailable)


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


@dataclass
class RoleCounts:
    """One role after observation: what status reports (:mod:`disagg_operator.status`)."""

    desired: int = 0
    ready: int = 0  # ready pods of the routed KV revision: the capacity routers see
    updated: int = 0  # current pods (the spec's pod template and KV revision)
    updated_ready: int = 0
    live: int = 0  # pods not terminating, any revision
    extra: int = 0  # live pods the spec no longer wants (old revisions, surplus)
    update_revision: str = ""  # the template new pods get
    current_revision: str = ""  # the template most routed pods run (= update when done)


@dataclass
class Plan:
    """This sync's pod writes and the routed KV revision after them."""

    routed: str
    target: str
    create: dict[str, list[int]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    counts: dict[str, RoleCounts] = field(default_factory=dict)


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def index_of(deployment: str, role: str, pod_name: str) -> int | None:
    """``i`` of a pod named ``<deployment>-<role>-<i>``; None for any other name."""
    prefix = f"{deployment}-{role}-"
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() and str(int(tail)) == tail else None


def views(
    deployment: str,
    pods: Sequence[Mapping[str, Any]],
    current_hash: Callable[[str, int], str],
) -> list[PodView]:
    """PodViews of observed pods; ``current_hash(role, i)``: the spec-hash render gives."""
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
            )
        )
    return out


def routed_next(
    target: str, routed: str | None, pods: Sequence[PodView], budgets: Mapping[str, Budget]
) -> str:
    """The KV revision routing selects after this sync (rule 1 of the module docstring)."""
    live = [p for p in pods if not p.terminating]
    if routed is None or routed == target or not any(p.kv == routed for p in live):
        return target
    for role, budget in budgets.items():
        ready = sum(1 for p in live if p.role == role and p.kv == target and p.current and p.ready)
        if budget.replicas > 0 and ready < max(1, budget.min_ready):
            return routed
    return target


def _lowest_free(taken: set[int], count: int) -> list[int]:
    out: list[int] = []
    i = 0
    while len(out) < count:
        if i not in taken:
            out.append(i)
        i += 1
    return out


def _unready_first(pods: Sequence[PodView]) -> list[PodView]:
    return sorted(pods, key=lambda p: (p.ready, -(p.index or 0)))


def roll(
    pods: Sequence[PodView], budget: Budget, taken: set[int], *, routed: bool
) -> tuple[list[int], list[str]]:
    """Rule 4 (``routed``) or rule 2 (not routed yet) for one role's pods of one revision:
    (indices to create, pod names to delete)."""
    if not routed:  # a whole new set first; availability is the routed revision's job
        budget = Budget(budget.replicas, budget.replicas, budget.replicas)
    live = [p for p in pods if not p.terminating]
    current = [p for p in live if p.current]
    old = [p for p in live if not p.current]
    room = budget.replicas + budget.surge - len(pods)
    create = _lowest_free(taken, max(0, min(budget.replicas - len(current), room)))
    spare = sum(1 for p in live if p.ready) - budget.min_ready
    delete: list[str] = []
    surplus = _unready_first(current)[: max(0, len(current) - budget.replicas)]
    for pod in [*_unready_first(old), *surplus]:
        if pod.ready and spare <= 0:
            continue
        spare -= 1 if pod.ready else 0
        delete.append(pod.name)
    return create, delete


def plan(
    *,
    target: str,
    routed: str | None,
    pods: Sequence[PodView],
    budgets: Mapping[str, Budget],
    revisions: Mapping[str, str] | None = None,
) -> Plan:
    """This sync's pod writes (the module docstring's rules, in order)."""
    routed_now = routed_next(target, routed, pods, budgets)
    out = Plan(routed=routed_now, target=target)
    keep = {target, routed_now}
    out.delete = [
        p.name for p in pods if not p.terminating and (p.kv not in keep or p.index is None)
    ]
    for role, budget in budgets.items():
        mine = [p for p in pods if p.role == role and p.index is not None]
        wanted = [p for p in mine if p.kv == target]
        taken = {p.index for p in mine if p.index is not None}
        create, delete = roll(wanted, budget, taken, routed=routed_now == target)
        out.create[role] = create
        out.delete += delete
        update = (revisions or {}).get(role, "")
        out.counts[role] = _counts(mine, budget, routed_now, target, update)
    return out


def _counts(
    pods: Sequence[PodView], budget: Budget, routed: str, target: str, update: str
) -> RoleCounts:
    live = [p for p in pods if not p.terminating]
    updated = [p for p in live if p.current and p.kv == target]
    old = [p.revision for p in live if p.kv == routed and not p.current]
    return RoleCounts(
        desired=budget.replicas,
        ready=sum(1 for p in live if p.ready and p.kv == routed),
        updated=len(updated),
        updated_ready=sum(1 for p in updated if p.ready),
        live=len(live),
        extra=max(0, len(live) - budget.replicas),
        update_revision=update,
        current_revision=max(sorted(set(old)), key=old.count) if old else update,
    )
