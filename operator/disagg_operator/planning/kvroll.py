"""A new KV revision rolled in within each role's maxSurge, the roles moving in step.

Part of planning (the LWS DisaggregatedSet planner's idea: new pods of every role grow in
proportional steps, and an old revision keeps whole pairs while it drains), because a
decode can read only a prefill of its own KV revision. Level-triggered: run :func:`roll`
again after its writes land. The rules: :func:`_creates`, :func:`_deletes`; the user's
view: docs/operator.md (Rollouts).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence

from disagg_operator.planning.pods import Budget, PodView, lowest_free


def roll(
    pods: Sequence[PodView], budgets: Mapping[str, Budget], target: str, reached: Collection[str]
) -> tuple[dict[str, list[int]], list[str]]:
    """This sync's (indices to create per role, pods to delete) for a deployment whose KV
    revision changed to ``target``; ``reached``: the revisions routers reach."""
    mine = [p for p in pods if p.index is not None]
    return _creates(mine, budgets, target), _deletes(mine, budgets, target, reached)


def _creates(
    pods: Sequence[PodView], budgets: Mapping[str, Budget], target: str
) -> dict[str, list[int]]:
    """New pods, in steps: each rolling role adds ``b = S`` pods a step (``U`` where S is 0:
    deleting makes its room); ``K = max ceil(R / b)`` over rolling roles and ``k = min
    floor(ready new · K / R)`` is how far the slowest role has come. A role may then have
    ``ceil((k+1) · R / K)`` new pods (at most R), at the lowest free indices, while its
    pods, terminating ones included (they hold their node's resources), stay within
    ``R + S``: the P:D ratio of each revision holds throughout. A Recreate role's new pods
    start once none of its old ones is left."""
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
    """Pods to delete. A revision is *usable* when routers reach it and it has a ready pod
    in every role with replicas (only then can a request be paired inside it); a role's
    *capacity* is its ready pods of usable revisions, its floor ``R - U``. A ready pod of a
    usable revision goes only while every role's capacity stays at its floor (or, already
    below, does not drop), so an old revision's last prefill goes only once its decodes are
    no longer needed; a role without surge guards its own capacity only (it must make room
    first); a Recreate role's old pods all go at once."""
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
    """Pods that may go, in the order they go: old pods unready first, then those of
    unusable revisions (they serve nothing), then the rest, highest index first; then new
    pods beyond R (a scale-down meanwhile)."""
    old = [p for p in live if p.kv != target]
    surplus = []
    for role, b in budgets.items():
        new = [p for p in live if p.role == role and p.kv == target]
        first = sorted(new, key=lambda p: (p.ready, p.current, -(p.index or 0)))
        surplus += first[: max(0, len(new) - b.replicas)]
    order = sorted(old, key=lambda p: (p.ready, usable(p.kv), -(p.index or 0)))
    return order + surplus
