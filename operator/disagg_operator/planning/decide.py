"""Observation → rollout plan: the glue between render and the pure planner.

:func:`decide` reads which KV revision the routing objects select now
(:func:`routed_revision`) and which ones every pod of the deployment's router knows
(:func:`~disagg_operator.render.router.revisions_reached`, from the observed router
Deployment), reads the pod each observed index should be from the sync's one render
(:class:`Rendered`, to tell current pods from old ones) and asks :func:`.rollout.plan`
for this sync's pod writes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_operator.api import (
    LABEL_KV_REVISION,
    LABEL_REVISION,
    ROLES,
    SPEC_HASH,
    DisaggregatedDeployment,
)
from disagg_operator.derive.scaling import effective_replicas
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning import rollout as planner
from disagg_operator.planning.observed import Observed
from disagg_operator.render import router as render_router
from disagg_operator.render.kvkey import kv_revision
from disagg_operator.render.objects import role_instance

ROUTING_KINDS = ("Service", "InferencePool")
PodRenderer = Callable[[str, int], dict[str, Any]]


@dataclass(frozen=True)
class Rendered:
    """One sync's render of a deployment's instances, made once before its plan:
    ``target``, the spec's KV revision; ``instance(role, index)``, the pod (or the
    LeaderWorkerSet standing for it) render gives that index now, rendered on first ask
    and kept. The plan before the writes, the writes and the plan after them read this
    one value, so no instance is rendered twice in a sync."""

    target: str
    instance: PodRenderer


def rendering(dd: DisaggregatedDeployment, uid: str, settings: Settings = DEFAULT) -> Rendered:
    """The sync's :class:`Rendered`: the spec's KV revision computed once, each instance
    rendered when first asked for."""
    kv = kv_revision(dd.spec, settings)

    @functools.cache
    def instance(role: str, index: int) -> dict[str, Any]:
        return role_instance(dd, uid=uid, role=role, index=index, kv=kv, settings=settings)

    return Rendered(kv, instance)


def routed_revision(name: str, observed: Sequence[Mapping[str, Any]]) -> str | None:
    """The KV revision the deployment's routing objects select now; None when none does.

    The role Services and the InferencePool are patched in the same sync, so they agree
    (the decode Service is asked first: it is what clients reach)."""
    wanted = [f"{name}-decode", f"{name}-prefill", name]
    found: dict[str, str] = {}
    for obj in observed:
        if obj.get("kind") not in ROUTING_KINDS:
            continue
        spec = obj.get("spec") or {}
        chosen = spec.get("selector") or {}
        chosen = chosen.get("matchLabels", chosen) if isinstance(chosen, Mapping) else {}
        value = chosen.get(LABEL_KV_REVISION) if isinstance(chosen, Mapping) else None
        if value:
            found[obj["metadata"]["name"]] = str(value)
    return next((found[n] for n in wanted if n in found), None)


def decide(dd: DisaggregatedDeployment, seen: Observed, rendered: Rendered) -> planner.Plan:
    """This sync's rollout plan for a validated deployment and what the sync ``seen``:
    its pods, the KV revision its routing objects select, its router Deployment and how
    busy each pod is (a scale-down takes the least busy first); ``rendered``: the sync's
    render, read for the hash and revision of each index."""
    kv = rendered.target

    def meta(role: str, index: int) -> Mapping[str, Any]:
        found: Mapping[str, Any] = rendered.instance(role, index)["metadata"]
        return found

    budgets: dict[str, planner.Budget] = {
        r: planner.Budget.of(effective_replicas(dd.spec, r), dd.spec.role(r).rollout) for r in ROLES
    }
    views = planner.views(
        dd.metadata.name,
        seen.pods,
        lambda role, i: str(meta(role, i)["annotations"][SPEC_HASH]),
        seen.busy,
    )
    reached: set[str] | None = None
    if render_router.pairs_by_revision(dd.spec):  # before the router exists: the Services'
        live = {v.kv for v in views if not v.terminating}
        router, routed = seen.router, seen.routed
        reached = render_router.revisions_reached(router, live) if router else {routed or kv}
    return planner.plan(
        target=kv,
        routed=seen.routed,
        pods=views,
        budgets=budgets,
        revisions={r: str(meta(r, 0)["labels"][LABEL_REVISION]) for r in ROLES},
        reached=reached,
        paused=dd.spec.paused,
    )
