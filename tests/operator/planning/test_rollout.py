"""The rollout planner, run against a simulated world (pods start unready, become ready one
step after they are created, deletions take one step), and the KV-compatibility key."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from disagg_operator.api import RolloutStrategy
from disagg_operator.engines.settings import DEFAULT
from disagg_operator.planning.rollout import Budget, PodView, index_of, plan, resolve, views
from disagg_operator.render import kvkey
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, role


def _budget(replicas: int, surge: Any, unavailable: Any) -> Budget:
    strategy = RolloutStrategy(max_surge=surge, max_unavailable=unavailable)
    return Budget.of(replicas, strategy)


def _pod(role: str, i: int, kv: str, *, current: bool = True, ready: bool = True) -> PodView:
    return PodView(f"d-{role}-{i}", role, i, kv, "r", current, ready, terminating=False)


class World:
    """Pods of one deployment and the routed KV revision, advanced one sync at a time."""

    def __init__(self, pods: list[PodView], routed: str | None) -> None:
        self.pods = {p.name: p for p in pods}
        self.routed = routed
        self.history: list[dict[str, Any]] = []

    def step(self, target: str, budgets: dict[str, Budget]) -> None:
        # last step's creations become ready, its deletions are gone
        self.pods = {
            n: dataclasses.replace(p, ready=True) for n, p in self.pods.items() if not p.terminating
        }
        result = plan(
            target=target, routed=self.routed, pods=list(self.pods.values()), budgets=budgets
        )
        self.routed = result.routed
        for name in result.delete:
            self.pods[name] = dataclasses.replace(self.pods[name], terminating=True, ready=False)
        for r, indices in result.create.items():
            for i in indices:
                pod = _pod(r, i, target, ready=False)
                assert pod.name not in self.pods, f"index {i} reused while taken"
                self.pods[pod.name] = pod
        self.history.append(self.snapshot())

    def snapshot(self) -> dict[str, Any]:
        live = [p for p in self.pods.values() if not p.terminating]
        return {
            "routed": self.routed,
            "ready_routed": {
                r: sum(1 for p in live if p.role == r and p.ready and p.kv == self.routed)
                for r in ("prefill", "decode")
            },
            "total": {
                r: sum(1 for p in self.pods.values() if p.role == r) for r in ("prefill", "decode")
            },
            "routable_kvs": {p.kv for p in live if p.kv == self.routed},
        }

    def done(self, target: str, budgets: dict[str, Budget]) -> bool:
        live = [p for p in self.pods.values() if not p.terminating]
        return self.routed == target and all(
            sorted(p.current and p.kv == target and p.ready for p in live if p.role == r)
            == [True] * b.replicas
            for r, b in budgets.items()
        )


def _run(world: World, target: str, budgets: dict[str, Budget], limit: int = 40) -> int:
    for steps in range(1, limit + 1):
        world.step(target, budgets)
        if world.done(target, budgets):
            return steps
    raise AssertionError(f"no convergence in {limit} steps: {world.history[-3:]}")


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable"),
    [(16, "25%", "25%"), (8, 0, 1), (8, 1, 0), (3, "25%", "25%"), (1, 1, 0), (1, 0, 1), (16, 4, 0)],
)
def test_in_place_roll_keeps_the_availability_floor(
    replicas: int, surge: Any, unavailable: Any
) -> None:
    budgets = {
        "prefill": _budget(replicas, surge, unavailable),
        "decode": _budget(replicas, surge, unavailable),
    }
    old = [_pod(r, i, "kv1", current=False) for r in budgets for i in range(replicas)]
    world = World(old, routed="kv1")
    _run(world, "kv1", budgets)
    b = budgets["decode"]
    for seen in world.history:
        assert seen["routed"] == "kv1"
        for r in budgets:
            assert seen["ready_routed"][r] >= b.min_ready, seen
            assert seen["total"][r] <= replicas + b.surge, seen


def test_in_place_roll_moves_a_few_pods_at_a_time() -> None:
    budgets = {"prefill": _budget(8, 0, 2), "decode": _budget(8, 0, 2)}
    world = World([_pod(r, i, "kv1", current=False) for r in budgets for i in range(8)], "kv1")
    world.step("kv1", budgets)
    deleting = [p for p in world.pods.values() if p.terminating]
    assert sorted(p.role for p in deleting) == ["decode", "decode", "prefill", "prefill"]
    steps = _run(world, "kv1", budgets)
    assert steps >= 6  # 8 pods, 2 at a time, two syncs per batch (delete, then create)


def test_unready_old_pods_go_first() -> None:
    budgets = {"prefill": _budget(4, 0, 1), "decode": _budget(0, 0, 1)}
    pods = [_pod("prefill", i, "kv1", current=False, ready=i != 2) for i in range(4)]
    result = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert result.delete == ["d-prefill-2"]  # the budget of 1 ready pod is not spent on it
    pods[2] = dataclasses.replace(pods[2], ready=True)
    assert plan(target="kv1", routed="kv1", pods=pods, budgets=budgets).delete == ["d-prefill-3"]


def test_scale_down_removes_unready_then_highest_index() -> None:
    budgets = {"prefill": _budget(2, "25%", "25%"), "decode": _budget(0, 0, 1)}
    pods = [_pod("prefill", i, "kv1", ready=i != 1) for i in range(5)]
    result = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert sorted(result.delete) == ["d-prefill-1", "d-prefill-3", "d-prefill-4"]
    assert result.create == {"prefill": [], "decode": []}


def test_scale_down_takes_the_least_busy_ready_pods_when_their_load_is_known() -> None:
    budgets = {"prefill": _budget(2, "25%", "25%"), "decode": _budget(0, 0, 1)}
    load = {"d-prefill-0": 0.0, "d-prefill-1": 6.0, "d-prefill-2": 1.0, "d-prefill-3": 9.0}
    pods = [dataclasses.replace(_pod("prefill", i, "kv1"), busy=load[f"d-prefill-{i}"])
            for i in range(4)]  # fmt: skip
    result = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert sorted(result.delete) == ["d-prefill-0", "d-prefill-2"]  # not the highest indices
    seen = views("d", [_observed("d-prefill-0")], lambda r, i: "h", {"d-prefill-0": 3.0})
    assert seen[0].busy == 3.0
    assert views("d", [_observed("d-prefill-0")], lambda r, i: "h")[0].busy == 0.0


def _observed(name: str) -> dict[str, Any]:
    labels = {"disagg.dev/role": "prefill", "disagg.dev/kv-revision": "kv1"}
    return {"metadata": {"name": name, "labels": labels, "annotations": {}}, "status": {}}


def test_new_pods_take_the_lowest_free_indices() -> None:
    budgets = {"prefill": _budget(3, 3, 0), "decode": _budget(0, 0, 1)}
    pods = [_pod("prefill", 1, "kv1", current=False), _pod("prefill", 4, "kv1", current=False)]
    result = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert result.create["prefill"] == [0, 2, 3]


@pytest.mark.parametrize(("prefill", "decode"), [(8, 16), (1, 1), (2, 6)])
def test_kv_change_never_routes_two_revisions_and_keeps_capacity(prefill: int, decode: int) -> None:
    """Without a revision-aware router: room for the new revision beside the old one."""
    budgets = {"prefill": _budget(prefill, "100%", "25%"), "decode": _budget(decode, "100%", "25%")}
    old = [_pod(r, i, "kv1") for r, b in budgets.items() for i in range(b.replicas)]
    world = World(old, routed="kv1")
    _run(world, "kv2", budgets)
    switched = False
    for seen in world.history:
        assert len(seen["routable_kvs"]) <= 1  # one revision routable at any time
        switched |= seen["routed"] == "kv2"
        for r, b in budgets.items():  # the routed revision carries at least the floor
            assert seen["ready_routed"][r] >= max(1, b.min_ready) or seen["routed"] == "kv2", seen
    assert switched and world.routed == "kv2"
    assert all(p.kv == "kv2" for p in world.pods.values() if not p.terminating)


def test_kv_change_keeps_old_pairs_until_the_new_revision_is_ready() -> None:
    budgets = {"prefill": _budget(2, "100%", 0), "decode": _budget(4, "100%", 0)}
    old = [_pod(r, i, "kv1") for r, b in budgets.items() for i in range(b.replicas)]
    first = plan(target="kv2", routed="kv1", pods=old, budgets=budgets)
    assert first.routed == "kv1" and first.delete == []
    assert first.create == {"prefill": [2, 3], "decode": [4, 5, 6, 7]}  # a whole set, new indices
    new = [_pod(r, i, "kv2") for r, ids in first.create.items() for i in ids]
    half = [dataclasses.replace(p, ready=p.role == "prefill") for p in new]
    assert plan(target="kv2", routed="kv1", pods=old + half, budgets=budgets).routed == "kv1"
    final = plan(target="kv2", routed="kv1", pods=old + new, budgets=budgets)
    assert final.routed == "kv2"
    assert sorted(final.delete) == sorted(p.name for p in old)


def test_a_reverted_kv_change_drops_the_unrouted_revision() -> None:
    budgets = {"prefill": _budget(1, 1, 0), "decode": _budget(1, 1, 0)}
    pods = [_pod(r, 0, "kv1") for r in budgets] + [_pod(r, 1, "kv2", ready=False) for r in budgets]
    result = plan(target="kv1", routed="kv1", pods=pods, budgets=budgets)
    assert sorted(result.delete) == ["d-decode-1", "d-prefill-1"]
    assert result.create == {"prefill": [], "decode": []}


def test_nothing_routed_yet_routes_the_spec_revision() -> None:
    budgets = {"prefill": _budget(1, 1, 0), "decode": _budget(1, 1, 0)}
    result = plan(target="kv1", routed=None, pods=[], budgets=budgets)
    assert result.routed == "kv1" and result.create == {"prefill": [0], "decode": [0]}


def test_strays_are_deleted() -> None:
    stray = PodView("d-prefill-x", "prefill", None, "kv1", "r", True, True, False)
    budgets = {"prefill": _budget(0, 1, 0), "decode": _budget(0, 1, 0)}
    assert plan(target="kv1", routed="kv1", pods=[stray], budgets=budgets).delete == ["d-prefill-x"]


def test_percentages_round_like_a_deployment() -> None:
    assert resolve("25%", 3, round_up=True) == 1 and resolve("25%", 3, round_up=False) == 0
    assert resolve(2, 3, round_up=False) == 2
    assert _budget(1, 0, 0).unavailable == 1  # refused by validation; never a deadlock here


def test_index_of() -> None:
    assert index_of("d", "prefill", "d-prefill-12") == 12
    assert index_of("d", "prefill", "d-prefill-012") is None
    assert index_of("d", "prefill", "d-decode-1") is None
    assert index_of("d", "prefill", "d-prefill-") is None


def _kv(engine: dict[str, Any] | None = None, **changes: Any) -> str:
    obj = body(engine="vllm", **changes)
    obj["spec"]["engine"].update(engine or {})
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems, problems
    return kvkey.kv_revision(dd.spec, DEFAULT)


def test_kv_key_moves_with_kv_fields_only() -> None:
    base = _kv()
    cpu = {"limits": {"cpu": "8", "memory": "16Gi"}}
    assert _kv(decode=role(resources={"limits": {"cpu": "16", "memory": "32Gi"}})) == base
    assert _kv(decode=role(args=["--max-num-seqs", "8"], resources=cpu)) == base
    assert _kv(decode=role(node_selector={"pool": "b"}, resources=cpu)) == base
    block = ["--block-size", "32"]  # one block size for both pools
    assert _kv(prefill=role(args=block, resources=cpu), decode=role(args=block, resources=cpu)) != (
        base
    )
    eq = ["--block-size=32"]
    assert _kv(prefill=role(args=eq, resources=cpu), decode=role(args=eq, resources=cpu)) == _kv(
        prefill=role(args=block, resources=cpu), decode=role(args=block, resources=cpu)
    )
    assert _kv(modelConfig={"blockSize": 32}) != base
    f16 = ["--dtype", "float16"]  # one dtype for both pools
    assert _kv(prefill=role(args=f16, resources=cpu), decode=role(args=f16, resources=cpu)) != base
    assert _kv(modelConfig={"dtype": "float16"}) != base
    assert _kv(modelConfig={"quantization": "fp8"}) != base
    env = [{"name": "VLLM_ATTENTION_BACKEND", "value": "TORCH_SDPA"}]
    assert _kv(decode=role(env=env, resources=cpu)) != base
    assert _kv(model="other/model") != base
    assert _kv(engine={"version": "0.32.0"}) != _kv(engine={"version": "0.33.0"})


def test_kv_key_ignores_images_of_one_vllm_version() -> None:
    a = _kv(engine={"image": "a/vllm:v0.33.0", "version": "0.33.0"})
    b = _kv(engine={"image": "b/vllm-patched:7", "version": "0.33.0"})
    assert a == b


def test_rollout_both_zero_is_refused_with_the_fix() -> None:
    _, problems = validation.parse(
        body(decode=role(replicas=2, rollout={"maxSurge": 0, "maxUnavailable": "25%"}))
    )
    assert [p.field for p in problems] == ["spec.decode.rollout"]
    assert "maxSurge: 1" in problems[0].message
    _, problems = validation.parse(body(decode=role(rollout={"maxSurge": "x"})))
    assert [p.field for p in problems] == ["spec.decode.rollout.maxSurge"]


def test_a_pod_with_another_or_no_spec_hash_is_not_current() -> None:
    """What the rollout replaces: the pod render gives the index now is current; one with
    another spec-hash (drift, an older spec) or none at all is old."""

    def pod(name: str, spec_hash: str | None) -> dict[str, Any]:
        notes = {} if spec_hash is None else {"disagg.dev/spec-hash": spec_hash}
        labels = {"disagg.dev/role": "prefill", "disagg.dev/kv-revision": "kv1"}
        return {"metadata": {"name": name, "labels": labels, "annotations": notes}}

    seen = views(
        "d",
        [pod("d-prefill-0", "h"), pod("d-prefill-1", "old"), pod("d-prefill-2", None)],
        lambda role, i: "h",
    )
    assert [(v.name, v.current) for v in seen] == [
        ("d-prefill-0", True),
        ("d-prefill-1", False),
        ("d-prefill-2", False),
    ]


def test_recreate_needs_neither_surge_nor_unavailable() -> None:
    recreate = {"strategy": "Recreate", "maxSurge": 0, "maxUnavailable": 0}
    _, problems = validation.parse(body(decode=role(replicas=2, rollout=recreate)))
    assert problems == []
    _, problems = validation.parse(body(decode=role(rollout={"strategy": "Rolling"})))
    assert [p.field for p in problems] == ["spec.decode.rollout.strategy"]
