"""The rollout benchmark's figures from object snapshots (pure)."""

from __future__ import annotations

from typing import Any

from disagg_tools.bench.rules import rollout_figures as figures


def _pod(name: str, role: str, kv: str, ready: bool = True) -> dict[str, Any]:
    labels = {"disagg.dev/deployment": "d", "disagg.dev/role": role, "disagg.dev/kv-revision": kv}
    status = {"conditions": [{"type": "Ready", "status": str(ready)}]}
    return {"metadata": {"name": name, "labels": labels}, "status": status}


def _svc(role: str, kv: str | None) -> dict[str, Any]:
    selector = {"disagg.dev/deployment": "d", "disagg.dev/role": role}
    if kv:
        selector["disagg.dev/kv-revision"] = kv
    return {"metadata": {"name": f"d-{role}"}, "spec": {"selector": selector}}


PODS = [
    _pod("d-prefill-0", "prefill", "a"),
    _pod("d-prefill-1", "prefill", "b"),
    _pod("d-decode-0", "decode", "a"),
    _pod("d-decode-1", "decode", "b"),
    _pod("d-decode-2", "decode", "b", ready=False),
]


def test_services_of_one_revision_offer_no_mixed_pair() -> None:
    assert figures.mixed_pairs("d", PODS, [_svc("prefill", "a"), _svc("decode", "a")]) == 0


def test_services_without_a_revision_offer_every_mixed_ready_pair() -> None:
    services = [_svc("prefill", None), _svc("decode", None)]
    assert figures.mixed_pairs("d", PODS, services) == 2  # (p0, d1), (p1, d0); d2 is unready


def test_a_pool_over_both_revisions_counts_too() -> None:
    services = [_svc("prefill", "a"), _svc("decode", "a")]
    pool = {"spec": {"selector": {"matchLabels": {"disagg.dev/deployment": "d"}}}}
    assert figures.mixed_pairs("d", PODS, services, [pool]) == 2
    pinned = {"spec": {"selector": {"matchLabels": {"disagg.dev/kv-revision": "b"}}}}
    assert figures.mixed_pairs("d", PODS, services, [pinned]) == 0


def test_ready_fractions_count_what_each_role_service_selects() -> None:
    services = [_svc("prefill", "b"), _svc("decode", "b")]
    fractions = figures.ready_fractions("d", PODS, services, {"prefill": 2, "decode": 2})
    assert fractions == {"prefill": 0.5, "decode": 0.5}
    assert figures.ready_fractions("d", PODS, [], {"prefill": 1, "decode": 0}) == {
        "prefill": 0.0,
        "decode": 1.0,
    }


def test_the_worst_role_is_the_one_furthest_under_its_floor() -> None:
    targets = figures.ready_targets({"prefill": 2, "decode": 16}, {"prefill": 0, "decode": 4})
    assert targets == {"prefill": 1.0, "decode": 0.75}
    # decode's 0.75 is the lower fraction, but prefill fell under its own floor
    assert figures.worst({"prefill": 0.9, "decode": 0.75}, targets) == ("prefill", 0.9, 1.0)


def _revision_svc(name: str, role: str, kv: str) -> dict[str, Any]:
    selector = {"disagg.dev/deployment": "d", "disagg.dev/role": role}
    return {
        "metadata": {"name": name},
        "spec": {"selector": {**selector, "disagg.dev/kv-revision": kv}},
    }


def _router_view(kvs: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        _revision_svc(f"d-{short}-{kv}", role, kv)
        for kv in kvs
        for short, role in (("p", "prefill"), ("d", "decode"))
    ]


def test_the_routers_revision_services_offer_no_mixed_pair_and_a_broken_one_shows() -> None:
    services = _router_view(("a", "b"))
    assert figures.mixed_pairs("d", PODS, services, revisions=["a", "b"]) == 0
    wrong = [*_router_view(("a",)), _revision_svc("d-p-b", "prefill", "b")]
    wrong.append(_revision_svc("d-d-b", "decode", "a"))  # b's decode Service selects a
    assert figures.mixed_pairs("d", PODS, wrong, revisions=["a", "b"]) == 1  # (p1, d0)


def test_usable_fractions_count_revisions_the_router_knows_with_both_roles_ready() -> None:
    services = _router_view(("a", "b"))
    replicas = {"prefill": 2, "decode": 2}
    both = figures.usable_fractions("d", PODS, services, replicas, ["a", "b"])
    assert both == {"prefill": 1.0, "decode": 1.0}  # a: p0+d0, b: p1+d1 (d2 unready)
    assert figures.usable_fractions("d", PODS, services, replicas, ["b"]) == {
        "prefill": 0.5,
        "decode": 0.5,
    }
    no_decode = [p for p in PODS if p["metadata"]["name"] != "d-decode-1"]
    # b has no ready decode left: its prefill pairs nothing
    assert figures.usable_fractions("d", no_decode, services, replicas, ["a", "b"]) == {
        "prefill": 0.5,
        "decode": 0.5,
    }


def test_extra_pods_is_the_most_beyond_replicas_in_any_role() -> None:
    assert figures.extra_pods(PODS, {"prefill": 2, "decode": 2}) == 1  # 3 decode pods
    assert figures.extra_pods(PODS, {"prefill": 1, "decode": 3}) == 1
    assert figures.extra_pods(PODS, {"prefill": 4, "decode": 4}) == 0
