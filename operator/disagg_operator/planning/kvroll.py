"""A new KV revision rolled in within each role's maxSurge, the roles moving in step.

Part of planning (the LWS DisaggregatedSet planner's idea: new pods of every
role grow in proportional steps, and an old revision keeps whole pairs while it drains).
:func:`roll` takes the pods of a deployment whose KV-compatibility key changed, each role's
:class:`~.pods.Budget`, the spec's KV revision ``T`` and the revisions routers reach
(``reached``); it returns the indices to create and the pods to delete in this sync. Run it
again after those writes land: it is level-triggered.

Terms, per role: ``R`` replicas, ``S`` maxSurge, ``U`` maxUnavailable. *New* pods are of
``T``; *old* pods of any other KV revision. A revision is *usable* when routers reach it
and it has a ready pod in every role with replicas: only then can a request be paired
inside it. A role's *capacity* is its ready pods of usable revisions; its *floor*
``R - U``.

1. Steps. Each rolling role adds ``b = S`` pods a step (``U`` where ``S`` is 0: deleting
   makes its room); ``K = max ceil(R / b)`` over rolling roles; ``k = min floor(ready new
   · K / R)`` is how far the slowest role has come. A role may then have ``ceil((k+1) · R /
   K)`` new pods (at most ``R``), created at the lowest free indices while its pods,
   terminating ones included (they still hold their node's resources), stay within
   ``R + S``. So every role's new pods grow by one step, and the next step waits until
   the slowest role's are ready: the P:D ratio of each revision holds throughout.
2. Old pods go unready first, then those of unusable revisions (they serve nothing), then
   the rest, highest index first; a ready pod of a usable revision only while every
   role's capacity stays at its floor (or, already below it, does not drop). So a ready
   old pod goes as a new one takes its place, and an old revision's last prefill (or
   decode) goes only once its other role's pods are no longer needed. A role with no
   surge must make room first: its ready pods go while its own capacity stays at its
   floor, whatever that does to the old revision's other role.
3. A Recreate role's old pods all go at once; its new ones start once none is left.
4. New pods beyond ``R`` (a scale-down meanwhile) go like old ones.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from disagg_operator.planning.pods import Budget, PodView, lowest_free


def roll(
    pods: Sequence[PodView], budgets: Mapping[str, Budget], target: str, reached: Collection[str]
) -> tuple[dict[str, list[int]], list[str]]:
    """This sync's (indices to create per role, pods to delete) of the module's rules."""
    mine = [p for p in pods if p.index is not None]
    return _creates(mine, budgets, target), _deletes(mine, budgets, target, reached)


def _creates(
    pods: Sequence[PodView], budgets: Mapping[str, Budget], target: str
) -> dict[str, list[int]]:
    live = [p for p in pods if not p.terminating]
    rolling = {r: b for r, b in budgets.items() if b.replicas > 0 and not b.recreate}
    steps = max((math.ceil(b.replicas / b.batch) for b in rolling.values()), default=1)
    ready_new = Counter(p.role for p in live if p.kv == target and p.ready)
    done = min((ready_new[r] * steps // b.replicas for r, b in rolling.items()), default=steps)
    out = {}
    for role, b in budgets.items():
        held = [p for p in pods if p.role == role]
        new = sum(1 for p in held if p.kv == target and not p.terminating)
        if b.recreate:  # only once every old pod is gone, terminating ones included
            count = b.replicas - new if all(p.kv == target for p in held) else 0
        else:
            want = min(b.replicas, math.ceil((done + 1) * b.replicas / steps))
            count = min(want - new, b.replicas + b.surge - len(held))
        out[role] = lowest_free({p.index for p in held if p.index is not None}, max(0, count))
    return out


def _deletes(
    pods: Sequence[PodView], budgets: Mapping[str, Budget], target: str, reached: Collection[str]
) -> list[str]:
    live = [p for p in pods if not p.terminating]
    ready = Counter((p.kv, p.role) for p in live if p.ready)
    needed = [r for r, b in budgets.items() if b.replicas > 0]

    def usable(kv: str) -> bool:
        return kv in reached and all(ready[kv, r] > 0 for r in needed)

    def capacity() -> dict[str, int]:
        kvs = {kv for kv, _ in ready if usable(kv)}
        return {r: sum(ready[kv, r] for kv in kvs) for r in needed}

    out = []
    for pod in _candidates(live, budgets, target, usable):
        budget = budgets[pod.role]
        if pod.ready:
            before = capacity()
            ready[pod.kv, pod.role] -= 1
            after = capacity()
            guarded = [] if budget.recreate else [pod.role] if budget.surge == 0 else needed
            if any(after[r] < min(before[r], budgets[r].min_ready) for r in guarded):
                ready[pod.kv, pod.role] += 1  # it still carries a floor: it stays
                continue
        out.append(pod.name)
    return out


def _candidates(
    live: Sequence[PodView],
    budgets: Mapping[str, Budget],
    target: str,
    usable: Callable[[str], bool],
) -> list[PodView]:
    """Pods that may go, in the order they go (rules 2 and 4)."""
    old = [p for p in live if p.kv != target]
    surplus = []
    for role, b in budgets.items():
        new = [p for p in live if p.role == role and p.kv == target]
        first = sorted(new, key=lambda p: (p.ready, p.current, -(p.index or 0)))
        surplus += first[: max(0, len(new) - b.replicas)]
    order = sorted(old, key=lambda p: (p.ready, usable(p.kv), -(p.index or 0)))
    return order + surplus
