"""A KV change rolled within maxSurge (planning.kvroll through planning.rollout.plan), run
against a simulated world: pods start unready and turn ready one sync later, deletions
take one sync, and a revision-aware router learns the revisions it is told one sync after
it is told (its Deployment's own roll)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from disagg_operator.api import RolloutStrategy
from disagg_operator.planning.rollout import BLOCKED, PAUSED, Budget, PodView, plan

ROLES = ("prefill", "decode")


def _budget(replicas: int, surge: Any = "25%", unavailable: Any = "25%", **kw: Any) -> Budget:
    return Budget.of(replicas, RolloutStrategy(max_surge=surge, max_unavailable=unavailable, **kw))


def _pod(role: str, i: int, kv: str, *, ready: bool = True, current: bool = True) -> PodView:
    return PodView(f"d-{role}-{i}", role, i, kv, "r", current, ready, terminating=False)


def _old(budgets: dict[str, Budget], kv: str = "kv1") -> list[PodView]:
    return [_pod(r, i, kv) for r, b in budgets.items() for i in range(b.replicas)]


class World:
    """One deployment's pods, the routed revision and what the router knows, a sync at a
    time. ``router``: a revision-aware router fronts it (else routers reach the routed
    revision only)."""

    def __init__(self, pods: list[PodView], routed: str, *, router: bool) -> None:
        self.pods = {p.name: p for p in pods}
        self.routed = routed
        self.router = router
        self.told: list[str] = [routed]  # the router Deployment's revisions
        self.known: set[str] = {routed}  # what every router pod knows
        self.history: list[dict[str, Any]] = []
        self.plans: list[Any] = []

    def step(self, target: str, budgets: dict[str, Budget], **kw: Any) -> Any:
        self.pods = {
            n: dataclasses.replace(p, ready=True) for n, p in self.pods.items() if not p.terminating
        }
        self.known = set(self.told)  # the router's own roll ended
        result = plan(
            target=target,
            routed=self.routed,
            pods=list(self.pods.values()),
            budgets=budgets,
            reached=self.known if self.router else None,
            **kw,
        )
        self.plans.append(result)
        self.routed = result.routed
        self.told = result.serving
        for name in result.delete:
            self.pods[name] = dataclasses.replace(self.pods[name], terminating=True, ready=False)
        for r, indices in result.create.items():
            for i in indices:
                pod = _pod(r, i, target, ready=False)
                assert pod.name not in self.pods, f"index {i} reused while taken"
                self.pods[pod.name] = pod
        self.history.append(self.snapshot(budgets))
        return result

    def reached(self) -> set[str]:
        return self.known if self.router else {self.routed}

    def snapshot(self, budgets: dict[str, Budget]) -> dict[str, Any]:
        """After this sync's writes: what each role holds and what routers can pair."""
        live = [p for p in self.pods.values() if not p.terminating]
        ready = Counter((p.kv, p.role) for p in live if p.ready)
        needed = [r for r, b in budgets.items() if b.replicas]
        usable = {
            kv for kv, _ in ready if kv in self.reached() and all(ready[kv, r] for r in needed)
        }
        return {
            "total": Counter(p.role for p in self.pods.values()),
            "capacity": {r: sum(ready[kv, r] for kv in usable) for r in ROLES},
            "ready": ready,
        }

    def done(self, target: str, budgets: dict[str, Budget]) -> bool:
        live = [p for p in self.pods.values() if not p.terminating]
        return all(
            sorted(p.kv == target and p.ready for p in live if p.role == r) == [True] * b.replicas
            for r, b in budgets.items()
        )


def _run(world: World, target: str, budgets: dict[str, Budget], limit: int = 120) -> int:
    for steps in range(1, limit + 1):
        world.step(target, budgets)
        if world.done(target, budgets):
            return steps
    raise AssertionError(f"no convergence in {limit} steps: {world.history[-3:]}")


SHAPES = [
    # (prefill R, decode R, maxSurge, maxUnavailable)
    (8, 16, 1, 0),
    (8, 16, "25%", "25%"),
    (1, 3, 1, 0),
    (2, 6, 1, 1),
    (3, 1, 2, 0),
    (4, 4, 0, 1),
    (1, 1, 1, 0),
    (5, 12, "10%", 0),
]


@pytest.mark.parametrize(("prefill", "decode", "surge", "unavailable"), SHAPES)
def test_a_kv_roll_behind_the_router_fits_max_surge_and_keeps_capacity(
    prefill: int, decode: int, surge: Any, unavailable: Any
) -> None:
    budgets = {"prefill": _budget(prefill, surge, unavailable)}
    budgets["decode"] = _budget(decode, surge, unavailable)
    world = World(_old(budgets), "kv1", router=True)
    _run(world, "kv2", budgets)
    for seen in world.history:
        for r, b in budgets.items():
            assert seen["total"][r] <= b.replicas + b.surge, seen  # never past maxSurge
            if b.surge:  # a role without surge makes its own room (module docstring, 2)
                assert seen["capacity"][r] >= b.min_ready, seen
    assert all(p.kv == "kv2" for p in world.pods.values() if not p.terminating)
    world.step("kv2", budgets)  # the old pods' deletion has landed: the router forgets kv1
    assert world.routed == "kv2" and world.told == ["kv2"]


def test_the_roles_move_in_step_and_an_old_revision_keeps_whole_pairs() -> None:
    budgets = {"prefill": _budget(4, 1, 0), "decode": _budget(8, 1, 0)}
    world = World(_old(budgets), "kv1", router=True)
    _run(world, "kv2", budgets)
    for seen in world.history:
        ready = seen["ready"]
        new = {r: ready["kv2", r] / budgets[r].replicas for r in ROLES}
        assert abs(new["prefill"] - new["decode"]) <= 0.5, seen  # one step apart at most
        # the old revision loses its last prefill only with its last decode, and back
        assert (ready["kv1", "prefill"] == 0) == (ready["kv1", "decode"] == 0), seen


def test_new_pods_wait_until_every_router_pod_knows_their_revision() -> None:
    budgets = {"prefill": _budget(2, 1, 0), "decode": _budget(2, 1, 0)}
    world = World(_old(budgets), "kv1", router=True)
    first = world.step("kv2", budgets)
    assert first.serving == ["kv1", "kv2"]  # the router is told first
    assert first.create == {"prefill": [], "decode": []} and first.delete == []
    second = world.step("kv2", budgets)  # the router's roll ended: it knows kv2
    assert second.create == {"prefill": [2], "decode": [2]}


def test_an_old_pod_goes_only_as_a_new_one_is_reached() -> None:
    budgets = {"prefill": _budget(1, 1, 0), "decode": _budget(1, 1, 0)}
    pods = _old(budgets) + [_pod(r, 1, "kv2") for r in ROLES]
    kept = plan(target="kv2", routed="kv1", pods=pods, budgets=budgets, reached={"kv1"})
    assert kept.delete == []  # kv2 is ready but no router reaches it yet
    moved = plan(target="kv2", routed="kv1", pods=pods, budgets=budgets, reached={"kv1", "kv2"})
    assert sorted(moved.delete) == ["d-decode-0", "d-prefill-0"]


def test_a_roll_that_needs_a_whole_set_is_held_without_a_revision_aware_router() -> None:
    budgets = {"prefill": _budget(4), "decode": _budget(8)}  # 25%: 1 and 2 of surge
    result = plan(target="kv2", routed="kv1", pods=_old(budgets), budgets=budgets)
    assert result.held is not None and result.held[0] == BLOCKED
    assert "spec.router.enabled" in result.held[1] and "Recreate" in result.held[1]
    assert (
        "prefill: maxSurge + maxUnavailable come to 2 pods, the new revision needs 3"
        in (result.held[1])
    )
    assert result.create == {"prefill": [], "decode": []} and result.delete == []
    assert result.routed == "kv1"


@pytest.mark.parametrize(
    "budgets",
    [
        {"prefill": _budget(1, 1, 0), "decode": _budget(1, 1, 0)},
        {"prefill": _budget(4, "100%", 0), "decode": _budget(8, "100%", 0)},
        {"prefill": _budget(4, 2, 1), "decode": _budget(6, 2, 2)},
        {"prefill": _budget(4, strategy="Recreate"), "decode": _budget(8, 8, 0)},
    ],
)
def test_without_the_router_a_roll_with_room_switches_whole(budgets: dict[str, Budget]) -> None:
    world = World(_old(budgets), "kv1", router=False)
    _run(world, "kv2", budgets)
    for seen in world.history:
        for r, b in budgets.items():
            assert seen["total"][r] <= b.replicas + b.surge, seen
            if not any(x.recreate for x in budgets.values()):
                assert seen["capacity"][r] >= b.min_ready, seen
    assert world.routed == "kv2"


def test_recreate_removes_the_old_pods_first_then_starts_the_new() -> None:
    budgets = {"prefill": _budget(2, strategy="Recreate"), "decode": _budget(2, 1, 0)}
    world = World(_old(budgets), "kv1", router=True)
    first = world.step("kv2", budgets)
    assert sorted(n for n in first.delete if "prefill" in n) == ["d-prefill-0", "d-prefill-1"]
    assert first.create["prefill"] == []  # not while they terminate
    second = world.step("kv2", budgets)
    assert second.create["prefill"] == [0, 1]
    _run(world, "kv2", budgets)
    assert max(s["total"]["prefill"] for s in world.history) == 2  # never an extra pod


def test_recreate_in_place_deletes_every_old_pod_then_creates() -> None:
    budgets = {"prefill": _budget(3, strategy="Recreate"), "decode": _budget(0)}
    pods = [_pod("prefill", i, "kv1", current=False) for i in range(3)]
    first = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert sorted(first.delete) == [p.name for p in pods] and first.create["prefill"] == []
    going = [dataclasses.replace(p, terminating=True) for p in pods]
    assert plan(target="kv1", routed="kv1", pods=going, budgets=budgets).create["prefill"] == []
    assert plan(target="kv1", routed="kv1", pods=[], budgets=budgets).create["prefill"] == [0, 1, 2]


def test_paused_freezes_a_roll_and_still_heals_a_settled_deployment() -> None:
    budgets = {"prefill": _budget(2, 1, 0), "decode": _budget(2, 1, 0)}
    rolling = plan(
        target="kv2", routed="kv1", pods=_old(budgets), budgets=budgets, reached={"kv1", "kv2"},
        paused=True,
    )  # fmt: skip
    assert rolling.held is not None and rolling.held[0] == PAUSED
    assert rolling.create == {"prefill": [], "decode": []} and rolling.delete == []
    stale = [dataclasses.replace(p, current=False) for p in _old(budgets)]
    frozen = plan(target="kv1", routed="kv1", pods=stale, budgets=budgets, paused=True)
    assert frozen.held is not None and frozen.create == {"prefill": [], "decode": []}
    missing = [p for p in _old(budgets) if p.name != "d-decode-1"]
    healed = plan(target="kv1", routed="kv1", pods=missing, budgets=budgets, paused=True)
    assert healed.held is None and healed.create == {"prefill": [], "decode": [1]}


def test_a_scale_down_during_a_kv_roll_stays_in_bounds() -> None:
    budgets = {"prefill": _budget(4, 1, 0), "decode": _budget(4, 1, 0)}
    world = World(_old(budgets), "kv1", router=True)
    for _ in range(4):
        world.step("kv2", budgets)
    smaller = {"prefill": _budget(2, 1, 0), "decode": _budget(2, 1, 0)}
    _run(world, "kv2", smaller)
    assert sum(1 for p in world.pods.values() if not p.terminating) == 4


def _defaults(replicas: int) -> Budget:
    return Budget.of(replicas, RolloutStrategy())  # maxSurge unset, maxUnavailable 25%


@pytest.mark.parametrize("prefill", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("decode", [1, 2, 4, 5, 9, 16])
def test_without_the_router_an_unset_max_surge_takes_the_room_a_kv_roll_needs(
    prefill: int, decode: int
) -> None:
    """A model change with the defaults and routers on the role Services: it finishes, and
    every sync keeps each role's capacity at R - maxUnavailable within R + the room."""
    budgets = {"prefill": _defaults(prefill), "decode": _defaults(decode)}
    world = World(_old(budgets), "kv1", router=False)
    _run(world, "kv2", budgets)
    assert all(p.held is None for p in world.plans)
    for seen in world.history:
        for r, b in budgets.items():
            assert seen["capacity"][r] >= b.min_ready, seen
            assert seen["total"][r] <= b.replicas + b.one_revision().surge <= 2 * b.replicas
    world.step("kv2", budgets)
    assert world.routed == "kv2"


@pytest.mark.parametrize("replicas", range(1, 41))
def test_the_room_is_the_least_that_does_not_block(replicas: int) -> None:
    """One pod less than the unset maxSurge's room, where it is more than 25%, would hold
    the roll (the planner's own rule, ``blocked``); behind the router it stays 25%."""
    b = _defaults(replicas)
    wide = b.one_revision()
    assert b.surge == -(-replicas // 4)  # 25% rounded up, as a Deployment's
    rolls = plan(target="kv2", routed="kv1", pods=_old({"r": b}), budgets={"r": b})
    assert rolls.held is None and rolls.create["r"]
    if wide.surge > b.surge:
        less = dataclasses.replace(b, surge=wide.surge - 1, wide=None)
        tight = plan(target="kv2", routed="kv1", pods=_old({"r": less}), budgets={"r": less})
        assert tight.held is not None and tight.held[0] == BLOCKED


def test_a_max_surge_that_is_set_bounds_the_roll_even_without_the_router() -> None:
    """A set maxSurge is the user's bound (a full pool): the roll is held, not widened."""
    budgets = {"prefill": _budget(4, "25%"), "decode": _budget(8, 2)}
    assert budgets["prefill"].one_revision() == budgets["prefill"]
    result = plan(target="kv2", routed="kv1", pods=_old(budgets), budgets=budgets)
    assert result.held is not None and result.held[0] == BLOCKED


def test_behind_the_router_an_unset_max_surge_stays_25_percent() -> None:
    budgets = {"prefill": _defaults(4), "decode": _defaults(8)}
    world = World(_old(budgets), "kv1", router=True)
    _run(world, "kv2", budgets)
    peak = {r: max(s["total"][r] for s in world.history) for r in ROLES}
    assert peak == {"prefill": 4 + 1, "decode": 8 + 2}  # 25% of 4 and 8, rounded up
