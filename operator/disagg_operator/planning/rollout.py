"""The rollout planner: observed pods + the spec's revisions → this sync's pod writes.

The LWS DisaggregatedSet planner's shape, with no cluster needed to test it: per role a
Deployment's rolling update (maxSurge, maxUnavailable, Recreate) when the KV revision
holds, :mod:`.kvroll` when it changes, because a decode can pair only with a prefill of
its own KV revision. Level-triggered: run it again after its writes land. The rules, the
terms and why an unset maxSurge takes more room: docs/operator.md (Rollouts).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from disagg_operator.derive.scaling import resolve
from disagg_operator.planning import kvroll
from disagg_operator.planning.pods import Budget, PodView, index_of, is_ready, lowest_free, views

__all__ = ["Budget", "Plan", "PodView", "RoleCounts", "index_of", "is_ready", "plan"]
__all__ += ["resolve", "views"]
PAUSED = "Paused"
BLOCKED = "KVRolloutBlocked"


@dataclass
class RoleCounts:
    """One role after observation: what status reports (:mod:`.status`)."""

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
    """This sync's pod writes and the routed KV revision after them; ``serving``: the KV
    revisions a revision-aware router is told of (every one with pods, and the spec's);
    ``held``: (reason, message) when a rollout waits on the spec (paused, or no room)."""

    routed: str
    target: str
    create: dict[str, list[int]] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)
    counts: dict[str, RoleCounts] = field(default_factory=dict)
    serving: list[str] = field(default_factory=list)
    held: tuple[str, str] | None = None
    paired: bool = False  # a revision-aware router is told ``serving``
    reached: frozenset[str] = frozenset()  # the revisions every router pod knows


def routed_next(
    target: str, routed: str | None, pods: Sequence[PodView], budgets: Mapping[str, Budget]
) -> str:
    """The KV revision the routing objects select after this sync: the routed one until the
    spec's has max(1, R - U) current ready pods in every role with R > 0; the spec's at once
    when nothing is routed or the routed one has no live pod left."""
    live = [p for p in pods if not p.terminating]
    if routed is None or routed == target or not any(p.kv == routed for p in live):
        return target
    for role, budget in budgets.items():
        ready = sum(1 for p in live if p.role == role and p.kv == target and p.current and p.ready)
        if budget.replicas > 0 and ready < max(1, budget.min_ready):
            return routed
    return target


def _unready_first(pods: Sequence[PodView]) -> list[PodView]:
    """The order pods go in: unready first, then the least busy, then the highest index."""
    return sorted(pods, key=lambda p: (p.ready, p.busy, -(p.index or 0)))


def roll(pods: Sequence[PodView], budget: Budget, taken: set[int]) -> tuple[list[int], list[str]]:
    """The rolling update (same KV revision) of one role's pods of the routed revision:
    (indices to create, pod names to delete)."""
    live = [p for p in pods if not p.terminating]
    current = [p for p in live if p.current]
    old = [p for p in live if not p.current]
    if budget.recreate:  # old pods first; new ones once they are gone
        pending = any(not p.current for p in pods)
        count = 0 if pending else budget.replicas - len(current)
        surplus = _unready_first(current)[: max(0, len(current) - budget.replicas)]
        return lowest_free(taken, max(0, count)), [p.name for p in [*old, *surplus]]
    room = budget.replicas + budget.surge - len(pods)
    create = lowest_free(taken, max(0, min(budget.replicas - len(current), room)))
    spare = sum(1 for p in live if p.ready) - budget.min_ready
    delete: list[str] = []
    surplus = _unready_first(current)[: max(0, len(current) - budget.replicas)]
    for pod in [*_unready_first(old), *surplus]:
        if pod.ready and spare <= 0:
            continue
        spare -= 1 if pod.ready else 0
        delete.append(pod.name)
    return create, delete


def blocked(budgets: Mapping[str, Budget]) -> list[str]:
    """Roles a KV change cannot roll when routers reach one revision at a time:
    the new revision must reach max(1, R - U) ready pods beside the old one's R - U."""
    return [
        role
        for role, b in budgets.items()
        if b.replicas > 0 and not b.recreate and b.surge + b.unavailable < max(1, b.min_ready)
    ]


def plan(
    *,
    target: str,
    routed: str | None,
    pods: Sequence[PodView],
    budgets: Mapping[str, Budget],
    revisions: Mapping[str, str] | None = None,
    reached: Collection[str] | None = None,
    paused: bool = False,
) -> Plan:
    """This sync's pod writes: the routed revision (:func:`routed_next`), then, in order,
    spec.paused holding every write while a pod is old, a KV change (:mod:`.kvroll`, or
    held when one revision's room does not fit), else each role's rolling update
    (:func:`roll`). A pod not named ``<deployment>-<role>-<i>`` is deleted whatever the
    state. ``reached``: the KV revisions a revision-aware router reaches (None: routers
    reach the routed one only); ``paused``: spec.paused."""
    routed_now = routed_next(target, routed, pods, budgets)
    out = Plan(routed=routed_now, target=target, paired=reached is not None)
    live = [p for p in pods if not p.terminating]
    mine = [p for p in pods if p.index is not None]
    out.serving = sorted({p.kv for p in live if p.index is not None} | {target})
    out.delete = [p.name for p in live if p.index is None]
    reach = {routed_now} if reached is None else set(reached)
    out.reached = frozenset(reach)
    kv_change = any(p.kv != target for p in live if p.index is not None)
    pending = kv_change or any(not p.current for p in live if p.index is not None)
    if kv_change and reached is None:  # one revision routed at a time: its room
        budgets = {r: b.one_revision() for r, b in budgets.items()}
    if paused and pending:
        out.held = (PAUSED, "spec.paused is true: no pod is created or deleted until it is false.")
    elif kv_change and reached is None and routed_now != target and blocked(budgets):
        out.held = (BLOCKED, _blocked_message(blocked(budgets), budgets))
    elif kv_change:
        creates, deletes = kvroll.roll(mine, budgets, target, reach)
        if reached is not None and target not in reach:  # the router learns it first
            creates = {r: [] for r in creates}
        out.create, out.delete = creates, out.delete + deletes
    else:
        for role, budget in budgets.items():
            held = [p for p in mine if p.role == role]
            create, delete = roll(held, budget, {p.index for p in held if p.index is not None})
            out.create[role] = create
            out.delete += delete
    out.create = {r: out.create.get(r, []) for r in budgets}
    for role, budget in budgets.items():
        update = (revisions or {}).get(role, "")
        held = [p for p in mine if p.role == role]
        out.counts[role] = _counts(held, budget, reach, target, update)
    return out


def _blocked_message(roles: Sequence[str], budgets: Mapping[str, Budget]) -> str:
    wants = "; ".join(
        f"{r}: maxSurge + maxUnavailable come to {budgets[r].surge + budgets[r].unavailable} "
        f"pods, the new revision needs {max(1, budgets[r].min_ready)}"
        for r in roles
    )
    return (
        "The KV-compatibility key changed, but routers that pick a prefill and a decode "
        "without regard to revision (the role Services, llm-d's endpoint picker) can move "
        "to the new revision only once it can carry the load beside the old one, and "
        f"there is no room for that ({wants}). Set spec.router.enabled (its router pairs "
        "each request within one revision, so the roll fits maxSurge; not with llm-d), a "
        "larger spec.<role>.rollout.maxSurge (or none: unset, it takes the room this "
        "needs), or spec.<role>.rollout.strategy: Recreate "
        "(the role stops while its pods are replaced). Until then the old revision serves."
    )


def _counts(
    pods: Sequence[PodView], budget: Budget, reach: Collection[str], target: str, update: str
) -> RoleCounts:
    live = [p for p in pods if not p.terminating]
    updated = [p for p in live if p.current and p.kv == target]
    old = [p.revision for p in live if p.kv in reach and not p.current]
    return RoleCounts(
        desired=budget.replicas,
        ready=sum(1 for p in live if p.ready and p.kv in reach),
        updated=len(updated),
        updated_ready=sum(1 for p in updated if p.ready),
        live=len(live),
        extra=max(0, len(live) - budget.replicas),
        update_revision=update,
        current_revision=max(sorted(set(old)), key=old.count) if old else update,
    )
