"""Rollout figures from snapshots of the emulator's objects: what routers could pair and
how much of each role could serve.

A *routing view* is each routing object's selection: the role Services ``<name>-prefill`` /
``<name>-decode`` (what a client's own router reaches), with llm-d the InferencePool (what
the endpoint picker chooses from, both roles), and for each KV revision the deployment's
router is told, its Services ``<name>-p-<kv>`` / ``<name>-d-<kv>`` (the router pairs within
each). A *mixed pair* is a Ready prefill pod and a Ready decode pod that one view offers
together while their ``disagg.dev/kv-revision`` labels differ: a pairing whose KV the decode
cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from disagg_operator.api import LABEL_KV_REVISION, LABEL_ROLE
from disagg_operator.planning.rollout import is_ready

ROLES = ("prefill", "decode")


def _selects(selector: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    labels = pod.get("metadata", {}).get("labels", {})
    terms = selector.get("matchLabels", selector)
    return all(labels.get(k) == v for k, v in terms.items())


def _serving(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pods if is_ready(p) and not p["metadata"].get("deletionTimestamp")]


def _role(pods: Sequence[Mapping[str, Any]], role: str) -> list[Mapping[str, Any]]:
    return [p for p in pods if p["metadata"].get("labels", {}).get(LABEL_ROLE) == role]


def _service_pair(name: str, kv: str | None) -> tuple[str, str]:
    """The (prefill, decode) Service names of the role view (``kv`` None) or of a KV
    revision the router is told."""
    return (
        (f"{name}-prefill", f"{name}-decode")
        if kv is None
        else (f"{name}-p-{kv}", f"{name}-d-{kv}")
    )


def mixed_pairs(
    name: str,
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    pools: Sequence[Mapping[str, Any]] = (),
    revisions: Sequence[str] = (),
) -> int:
    """Ready (prefill, decode) pairs of different KV revisions that a routing view offers;
    ``revisions``: those the router is told (a view each)."""
    serving = _serving(pods)
    by_name = {s["metadata"]["name"]: s["spec"]["selector"] for s in services}
    views: list[tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]] = []
    for kv in [None, *revisions]:
        prefill, decode = _service_pair(name, kv)
        if prefill in by_name and decode in by_name:
            views.append(
                (
                    [p for p in _role(serving, "prefill") if _selects(by_name[prefill], p)],
                    [p for p in _role(serving, "decode") if _selects(by_name[decode], p)],
                )
            )
    for pool in pools:
        chosen = [p for p in serving if _selects(pool["spec"]["selector"], p)]
        views.append((_role(chosen, "prefill"), _role(chosen, "decode")))
    return sum(
        1
        for prefill, decode in views
        for p in prefill
        for d in decode
        if p["metadata"]["labels"].get(LABEL_KV_REVISION)
        != d["metadata"]["labels"].get(LABEL_KV_REVISION)
    )


def ready_fractions(
    name: str,
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    replicas: Mapping[str, int],
) -> dict[str, float]:
    """Per role: Ready pods its role Service selects / replicas (capped at 1): the capacity
    routers can use."""
    serving = _serving(pods)
    by_name = {s["metadata"]["name"]: s["spec"]["selector"] for s in services}
    out = {}
    for role, wanted in replicas.items():
        selector = by_name.get(f"{name}-{role}")
        chosen = [p for p in _role(serving, role) if selector and _selects(selector, p)]
        out[role] = min(1.0, len(chosen) / wanted) if wanted else 1.0
    return out


def usable_fractions(
    name: str,
    pods: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    replicas: Mapping[str, int],
    revisions: Sequence[str],
) -> dict[str, float]:
    """Per role: Ready pods the router can pair / replicas (capped at 1): those its
    revisions' Services select, in revisions with a Ready pod in every role that has
    replicas (a revision missing a role pairs nothing)."""
    serving = _serving(pods)
    by_name = {s["metadata"]["name"]: s["spec"]["selector"] for s in services}
    chosen: dict[str, dict[str, int]] = {}
    for kv in revisions:
        names = dict(zip(ROLES, _service_pair(name, kv), strict=True))
        chosen[kv] = {
            r: sum(
                1
                for p in _role(serving, r)
                if names[r] in by_name and _selects(by_name[names[r]], p)
            )
            for r in ROLES
        }
    usable = [c for c in chosen.values() if all(c[r] for r in ROLES if replicas.get(r))]
    return {
        r: min(1.0, sum(c[r] for c in usable) / wanted) if wanted else 1.0
        for r, wanted in replicas.items()
    }


def extra_pods(pods: Sequence[Mapping[str, Any]], replicas: Mapping[str, int]) -> int:
    """The most pods (terminating ones included: they hold their node's resources) beyond
    replicas in any role."""
    return max([0, *(len(_role(pods, r)) - wanted for r, wanted in replicas.items())])


def ready_targets(
    replicas: Mapping[str, int], max_unavailable: Mapping[str, int]
) -> dict[str, float]:
    """Per role: 1 - maxUnavailable/replicas, the least fraction a rollout must keep."""
    return {r: 1.0 - max_unavailable[r] / n for r, n in replicas.items() if n}


def worst(lowest: Mapping[str, float], targets: Mapping[str, float]) -> tuple[str, float, float]:
    """(role, its lowest fraction, its target) of the role closest to (or furthest under)
    its target: the one pair of figures that says whether every role kept its floor."""
    role = min(targets, key=lambda r: lowest[r] - targets[r])
    return role, lowest[role], targets[role]
