"""The rollout planner: observed pods + the spec's revisions → this sync's pod writes.

The LWS DisaggregatedSet planner's shape: no cluster needed to test it.
:func:`plan` takes every observed pod of a deployment, the KV revision the routing objects
select now, and per role the replicas, the strategy and which pod a given index should be;
it returns which KV revision routing selects after this sync, which indices to create and
which pods to delete. Run it again after those writes land: it is level-triggered.

Terms, per role: ``R`` replicas, ``S`` maxSurge (percent of R rounded up), ``U``
maxUnavailable (rounded down; when both are 0 a Deployment would never progress, so
validation refuses it and ``U = 1`` here). A pod is *current* when its spec-hash equals
the pod render gives its index now; ``T`` is the spec's KV revision (:mod:`.kvkey`).

1. Routing objects. The role Services and the InferencePool select one KV revision, the
   routed one ``X``, since routers on them (a client's own, llm-d's endpoint picker) pick
   a prefill and a decode independently. It stays ``X`` until ``T`` can carry the load:
   in every role with ``R > 0``, current ready pods of ``T`` ≥ max(1, R - U). It is ``T``
   at once when nothing is routed yet or ``X`` has no live pod left.
2. Who reaches what. The deployment's own router (spec.router, without llm-d) pairs each
   request within one KV revision and is told every revision with pods (``serving``);
   ``reached`` is what every router pod knows (:mod:`.decide` reads it from the router
   Deployment). Without it, routers reach ``X`` alone.
3. A KV change (pods of another revision than ``T``) rolls with :mod:`.kvroll`: ``T``'s
   pods grow in step in every role within ``R + S``, old pods go as the reached capacity
   allows. With the router, ``T``'s first pods start only once every router pod knows
   ``T``. Without it, ``T`` must reach max(1, R - U) ready pods while ``X`` keeps its
   R - U, so ``S`` is the budget's ``wide`` surge (maxSurge unset: at least max(1, R - U)
   - U, the room that takes); when ``S + U`` cannot hold that in some role (a maxSurge
   set too low, not Recreate), nothing starts and ``held`` says why and what to change
   (KVRolloutBlocked).
4. ``spec.paused``: while any pod is old (another template or revision), no pod is created
   or deleted (``held``: Paused); a deployment with nothing to roll still heals and scales.
5. Same KV revision: a Deployment's rolling update per role: ``create = min(R - current,
   R + S - total)`` new pods (``total`` counts terminating pods too: they still hold
   their node's resources), at the lowest free indices; old pods are deleted unready
   first, then ready ones while ``ready - deleted ≥ R - U``; current pods beyond ``R``
   (a scale-down) go unready first, then the least busy (requests in flight as the
   autoscaler last read them from Prometheus; without it all count 0), then the highest
   index; the preStop drain covers the work in flight. Recreate: every
   old pod goes at once, the new ones start when none is left.

Pods not named ``<deployment>-<role>-<i>`` are deleted whatever the state.
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
    """The KV revision the routing objects select after this sync (rule 1)."""
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
    """Rule 5 for one role's pods of the routed revision: (indices to create, pod names to
    delete)."""
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
    """Roles a KV change cannot roll when routers reach one revision at a time (rule 3):
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
    """This sync's pod writes (the module docstring's rules, in order). ``reached``: the
    KV revisions a revision-aware router reaches (None: routers reach the routed one only);
    ``paused``: spec.paused."""
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
    if kv_change and reached is None:  # one revision routed at a time: its room (rule 3)
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
