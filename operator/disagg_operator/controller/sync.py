"""Reconcile one DisaggregatedDeployment: read observed → render desired → plan → execute.

I/O shell around the pure core (render, plan, status), in the sample-controller shape. The
API client is passed in (:class:`disagg_operator.controller.client.Api` or a test double
with the same methods); this module imports no kopf or HTTP library. Every trigger comes
through :class:`~disagg_operator.controller.reconciler.Reconciler`, reads come from the
watch-fed cache (never a GET or LIST) and a refused write stops no other write, so one path
heals every case. Events and the error policy: docs/operator.md.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from disagg_operator.api import API_VERSION, INFERENCE_POOL_APIS, DisaggregatedDeployment, kinds
from disagg_operator.controller.canaries import CanaryReader
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.rules import keys
from disagg_operator.controller.rules.cache import Cache, Recorder
from disagg_operator.controller.rules.refusals import (
    ApiError,
    Refusal,
    api_message,
    is_refusal,
    lines,
)
from disagg_operator.planning import status as status_mod
from disagg_operator.planning.actions import Action, Verb, plan
from disagg_operator.planning.decide import (
    ROUTING_KINDS,
    Rendered,
    decide,
    rendering,
    routed_revision,
)
from disagg_operator.planning.observed import Observed
from disagg_operator.planning.pods import instances
from disagg_operator.planning.reasons import API_REFUSED, INVALID_SPEC
from disagg_operator.planning.rollout import Plan
from disagg_operator.render.kvkey import Revisions
from disagg_operator.render.monitoring import names as monitoring_names
from disagg_operator.render.objects import render_model
from disagg_operator.render.router import name_of as router_name
from disagg_operator.validation.spec import Problem, parse

log = logging.getLogger("disagg.operator")

# Writes of one deployment in flight at once (the API client bounds all of them, client.py).
PER_DEPLOYMENT_WRITES = 8
# InferencePools are owned only with llm-d: looked at only when the spec has an ``llmd``
# section, so clusters without the Inference Extension (and charts without its RBAC) see
# no calls for it, and only in the API version the spec renders
# (``llmd.inferencePool.version``), so the chart grants one API group. Removing the whole
# section, or switching the version, leaves the old pool behind until the deployment is
# deleted; setting ``llmd.enabled: false`` (or ``inferencePool.enabled: false``) removes it.
# The monitoring objects likewise only with a ``monitoring`` section (the CRD defaults
# none in), and ``monitoring.enabled: false`` removes them. The router's ServiceAccount,
# Role and RoleBinding (transfer locality) while the spec asks for the locality or the
# router Deployment the cache holds still runs as that account, so that turning the
# locality or the router off removes them and a router without it costs no lookup. A
# lookup the chart's RBAC refuses (403) observes nothing: the write that follows is
# refused and reported.
POOL = kinds.child("InferencePool")
ROUTER_ACCESS = ("ServiceAccount", "Role", "RoleBinding")


def optional_kinds(
    spec: Any, name: str, router_account: bool = False
) -> tuple[tuple[str, str, str, str], ...]:
    """(apiVersion, kind, plural, name) of the objects of kinds no watch covers that a raw
    spec of deployment ``name`` may own: with ``llmd`` the InferencePool, with
    ``monitoring`` the PodMonitors and the PrometheusRule, with ``routing.transferLocality``
    (or ``router_account``: the observed router still runs as its account) the router's
    ServiceAccount, Role and RoleBinding (none otherwise).
    The spec is raw, read before validation: a section of the wrong shape owns nothing
    (validation reports it)."""
    found: list[tuple[str, str, str, str]] = []
    llmd = _section(spec, "llmd")
    if llmd:
        version = _section(llmd, "inferencePool").get("version", "v1")
        api = INFERENCE_POOL_APIS.get(version) if isinstance(version, str) else None
        if api:  # unknown: invalid spec, nothing is written
            found.append((api, POOL.kind, POOL.plural, name))
    if _section(spec, "monitoring"):
        for kind, child in monitoring_names(name):
            row = kinds.child(kind)
            found.append((row.api_version, kind, row.plural, child))
    if _section(_section(spec, "routing"), "transferLocality") or router_account:
        for kind in ROUTER_ACCESS:
            row = kinds.child(kind)
            found.append((row.api_version, kind, row.plural, router_name(name)))
    return tuple(found)


def _section(raw: Any, key: str) -> dict[str, Any]:
    """``raw[key]`` where both are objects, else {}."""
    value = raw.get(key) if isinstance(raw, dict) else None
    return value if isinstance(value, dict) else {}


class Client(Protocol):
    """What a sync needs from the API client (:class:`disagg_operator.controller.client.Api`)."""

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any: ...
    async def listing(
        self, api_version: str, plural: str, namespace: str, label_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]: ...
    async def create(self, obj: Any) -> Any: ...
    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Any,
        *,
        subresource: str = "",
    ) -> Any: ...
    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> Any: ...
    async def event(self, involved: Any, *, type_: str, reason: str, message: str) -> None: ...


@dataclass
class Outcome:
    """What one sync did (for logs, metrics and tests)."""

    actions: list[Action] = field(default_factory=list)  # attempted (held ones excluded)
    problems: list[Problem] = field(default_factory=list)
    done: list[Action] = field(default_factory=list)  # accepted and changed something
    refusals: list[Refusal] = field(default_factory=list)  # refused now, or held
    status_written: bool = False
    more: bool = False  # writes changed things and the rollout has a next step already


async def observe(api: Client, cache: Cache, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The children this deployment owns now: from the cache, and with llm-d the pool by
    name (InferencePools are not watched: one GET per sync of an llm-d deployment)."""
    meta = body["metadata"]
    uid = str(meta.get("uid") or "")
    observed = cache.children(meta["namespace"], meta["name"], uid)
    account = _runs_as_router_account(observed, meta["name"])
    for version, kind, plural, name in optional_kinds(body.get("spec"), meta["name"], account):
        try:
            found = await api.get(version, plural, meta["namespace"], name)
        except ApiError as e:
            if e.status != 403:
                raise
            log.debug("%s %s/%s not readable: %s", kind, meta["namespace"], name, e)
            continue
        if found is not None and any(r.get("uid") == uid for r in _refs(found)):
            found.setdefault("kind", kind)
            found.setdefault("apiVersion", version)
            observed.append(found)
    return observed


def _runs_as_router_account(observed: list[dict[str, Any]], name: str) -> bool:
    """Whether the observed router Deployment's pods run as the router's own account."""
    wanted = router_name(name)
    return any(
        obj.get("kind") == "Deployment"
        and obj.get("metadata", {}).get("name") == wanted
        and obj.get("spec", {}).get("template", {}).get("spec", {}).get("serviceAccountName")
        == wanted
        for obj in observed
    )


def _refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = obj.get("metadata", {}).get("ownerReferences") or []
    return refs


async def execute(
    api: Client,
    actions: list[Action],
    record: Recorder | None = None,
    limit: int = PER_DEPLOYMENT_WRITES,
) -> tuple[list[Action], list[Refusal]]:
    """Apply actions, at most ``limit`` at a time: writes first, then deletes. ``record`` sees
    every answer (the cache keeps them until the watch shows them, see cache.py).

    Every action runs. Returns the actions that changed something (a create answered 409
    AlreadyExists did not) and the refused ones (see the module docstring); any other
    failure propagates."""
    gate = asyncio.Semaphore(limit)

    async def one(action: Action) -> Action | Refusal | None:
        created = None
        try:
            async with gate:
                created = await _write(api, action, record)
        except ApiError as e:
            if not is_refusal(e.status):
                raise
            reason, message = api_message(e.text)
            return Refusal(action.verb, action.kind, action.name, e.status, reason, message)
        return None if action.verb == "create" and created is None else action

    writes = await asyncio.gather(*(one(a) for a in actions if a.verb != "delete"))
    if any(isinstance(w, Refusal) and w.kind in ROUTING_KINDS for w in writes):
        # A routing object kept its old selector: the pods it still routes to must stay
        # (after a KV-revision switch, the deletes are the old revision's pods). The next
        # sync, once the refusal is gone, deletes them.
        return [w for w in writes if isinstance(w, Action)], [
            w for w in writes if isinstance(w, Refusal)
        ]
    deletes = await asyncio.gather(*(one(a) for a in actions if a.verb == "delete"))
    results = [*writes, *deletes]
    return (
        [r for r in results if isinstance(r, Action)],
        [r for r in results if isinstance(r, Refusal)],
    )


async def _write(api: Client, action: Action, record: Recorder | None) -> Any:
    """One action's calls; the create's answer (None: it existed), else True. Answers
    about watched kinds go to ``record`` (the Secret and the pool are not cached)."""
    if record is None or action.kind not in kinds.WATCHED_NAMES:
        record = None
    if action.verb == "delete":
        gone = await api.delete(action.api_version, action.kind, action.namespace, action.name)
        if record is not None:
            record.deleted(action.kind, action.name, gone)
    elif action.verb == "create":
        created = await api.create(action.body)
        if record is not None:
            record.wrote(created)
        return created
    else:
        patched = await api.patch(
            action.api_version, action.kind, action.namespace, action.name, action.body
        )
        if record is not None:
            record.wrote(patched)
    return True


def status_patch(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Merge patch from ``old`` status to ``new`` status; {} when they are equal. A key
    gone from a nested object is removed too (a merge patch merges objects)."""
    old = old or {}
    if old == new:
        return {}
    out: dict[str, Any] = {k: None for k in old if k not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            out[key] = {**{k: None for k in before if k not in value}, **value}
        else:
            out[key] = value
    return out


@dataclass(frozen=True)
class Heard:
    """What the operator's other loops last heard, for a sync to read: ``canaries``, the
    transfer canaries' verdicts (None: never asked, the latches alone decide
    TransferPathReady); ``busy``, requests running per pod as the autoscaler last read
    them (None: never read; a scale-down takes the least busy first)."""

    canaries: CanaryReader | None = None
    busy: Mapping[str, float] | None = None


async def sync(
    api: Client,
    cache: Cache,
    body: dict[str, Any],
    config: OperatorConfig,
    *,
    now: datetime.datetime,
    held: Sequence[Refusal] = (),
    heard: Heard = Heard(),
) -> Outcome:
    """One level-triggered pass over deployment ``body``, reading its children from
    ``cache`` (no LIST) and recording every write's answer there.

    ``config``: the operator's configuration: its root key (the handshake key is derived
    from it, see keys.py; the :class:`Reconciler` draws one when the operator has none)
    and settings (engines, platforms, canary image); ``held``: writes refused by an
    earlier sync whose back-off has not ended: writes to those objects are not attempted
    and, while still planned, still reported; ``heard``: see :class:`Heard`."""
    if config.root_key is None:
        raise ValueError("sync: config.root_key is unset; pass the operator's root key")
    settings = config.settings
    children = await observe(api, cache, body)
    dd, problems = parse(body, settings)
    outcome = Outcome(problems=problems)
    meta = body["metadata"]
    uid, key = str(meta.get("uid") or ""), (meta["namespace"], meta["name"])
    record = Recorder(cache, key)
    seen = _observed(body, children, now, heard.busy)
    steps: Plan | None = None
    if dd is not None and not problems:
        rendered = rendering(dd, uid, settings)  # the sync's one render, before its plan
        steps = decide(dd, seen, rendered)
        hmac_key = keys.derive(config.root_key, meta["namespace"], meta["name"], uid)
        desired = render_model(
            dd,
            uid=uid,
            hmac_key=hmac_key,
            revisions=Revisions(rendered.target, steps.routed, steps.serving),
            pods=False,
            settings=settings,
        )
        serving = steps.serving
        others = [o for o in children if o["kind"] not in kinds.INSTANCE_KINDS]
        actions = plan(keys.without_secrets(desired), others)
        todo = actions + pod_actions(dd, steps, rendered, seen.pods)
        await _apply(api, body, desired, todo, held, outcome, record)
        if outcome.done:  # count what is there now, the writes' answers included
            now_seen = cache.children(*key, uid)
            seen = replace(_observed(body, now_seen, now, heard.busy), routed=steps.routed)
            steps = decide(dd, seen, rendered)  # after the writes: the same render
            outcome.more = (
                any(steps.create.values()) or bool(steps.delete) or steps.serving != serving
            )
    # what the canary watch heard last (reconciler.watch_canaries): no sync waits for a pod
    real = [p for p in seen.pods if p["kind"] == "Pod"]  # a canary runs in a pod
    said = heard.canaries.heard(key, real) if heard.canaries else None
    seen = replace(seen, group_pods=cache.group_pods(*key), canary_said=said)
    spec = dd.spec if dd is not None else None
    status = status_mod.compute(
        seen, spec=spec, problems=problems, rollout=steps, refusals=outcome.refusals,
        settings=settings,
    )  # fmt: skip
    outcome.status_written = await _write_status(api, body, status, outcome, record)
    return outcome


def _observed(
    body: dict[str, Any],
    children: Sequence[dict[str, Any]],
    now: datetime.datetime,
    busy: Mapping[str, float] | None,
) -> Observed:
    """What planning reads of deployment ``body`` and its ``children``."""
    name = body["metadata"]["name"]
    return Observed(
        name=name,
        now=now,
        pods=instances(children),
        generation=body["metadata"].get("generation"),
        previous=body.get("status"),
        routed=routed_revision(name, children),
        router=_router(name, children),
        busy=busy,
    )


def _router(name: str, observed: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The deployment's router Deployment as observed (None: not there)."""
    wanted = router_name(name)
    found = (o for o in observed if o["kind"] == "Deployment" and o["metadata"]["name"] == wanted)
    return next(found, None)


def pod_actions(
    dd: DisaggregatedDeployment,
    steps: Plan,
    rendered: Rendered,
    observed: Sequence[Mapping[str, Any]] = (),
) -> list[Action]:
    """The rollout plan's instance writes (pods, or LeaderWorkerSets where instances span
    pods): creates in role order, then deletes; ``rendered``: the sync's render (what each
    created instance is); ``observed``: the instances seen (what kind each deleted one is)."""
    namespace = dd.metadata.namespace
    kind_of = {o["metadata"]["name"]: o["kind"] for o in observed}

    def write(verb: Verb, kind: str, name: str, content: Any = None) -> Action:
        return Action(verb, kind, name, namespace, kinds.BY_KIND[kind].api_version, content)

    actions = [
        write("create", body["kind"], body["metadata"]["name"], body)
        for role, indices in steps.create.items()
        for body in (rendered.instance(role, i) for i in indices)
    ]
    actions += [write("delete", kind_of.get(name, "Pod"), name) for name in steps.delete]
    return actions


async def _apply(
    api: Client,
    body: dict[str, Any],
    desired: list[dict[str, Any]],
    actions: list[Action],
    held: Sequence[Refusal],
    outcome: Outcome,
    record: Recorder,
) -> None:
    """Execute the planned ``actions`` but those to ``held`` objects, with the Secret's
    create when pods are created (keys.writes); fill in ``outcome``."""
    holding = {(r.kind, r.name) for r in held}
    planned = {(a.kind, a.name) for a in actions}
    todo = [a for a in actions if (a.kind, a.name) not in holding]
    outcome.actions = keys.writes(desired, todo)
    outcome.done, refused = await execute(api, outcome.actions, record)
    outcome.refusals = [r for r in held if (r.kind, r.name) in planned] + refused
    if outcome.done:  # what `kubectl describe` shows: one Normal event per change
        summary = ", ".join(map(str, outcome.done))
        await api.event(body, type_="Normal", reason="Reconciled", message=summary)


async def _write_status(
    api: Client,
    body: dict[str, Any],
    status: dict[str, Any],
    outcome: Outcome,
    record: Recorder,
) -> bool:
    previous = body.get("status")
    patch = status_patch(previous, status)
    if not patch:
        return False
    meta = body["metadata"]
    answer = await api.patch(
        API_VERSION,
        body["kind"],
        meta["namespace"],
        meta["name"],
        {"status": patch},
        subresource="status",
    )
    record.wrote(answer)  # the next sync compares with what was written
    if outcome.problems and _messages(previous, INVALID_SPEC) != _messages(status, INVALID_SPEC):
        text = "; ".join(str(p) for p in outcome.problems)
        await api.event(body, type_="Warning", reason=INVALID_SPEC, message=text)
    told = " ".join(_messages(previous, API_REFUSED))
    for line in lines(outcome.refusals):  # once per answer: the stored status remembers it
        if line not in told:
            await api.event(body, type_="Warning", reason=API_REFUSED, message=line)
    return True


def _messages(status: dict[str, Any] | None, reason: str) -> list[str]:
    conditions = (status or {}).get("conditions") or []
    return [c.get("message", "") for c in conditions if c.get("reason") == reason]
