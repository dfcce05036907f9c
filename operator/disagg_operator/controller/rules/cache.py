"""The watch-fed cache: deployments and their children as the watches last showed them,
corrected by the operator's own writes until the watches show those.

No kopf import: the sources are read-only mappings, in the operator kopf indices filled
from the same watch streams the handlers use (see handlers.py). A sync may start before
the watch has delivered the answers to the previous sync's writes, so the cache shows each
write's answer until the watch catches up: no sync creates twice or counts a created pod
as missing. The staleness rule, echoes and drift: docs/operator.md (the controller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from disagg_operator.api import LABEL_DEPLOYMENT, kinds
from disagg_operator.contracts import lws

Key = tuple[str, str]  # (namespace, deployment name)
ObjectKey = tuple[str, str]  # (kind, name) within a deployment
Source = Mapping[Key, Iterable[dict[str, Any]]]
CONTROLLER_KIND = "DisaggregatedDeployment"
# Metadata no sync reads: the server's field bookkeeping and kopf's own annotations.
_DROPPED_META = ("managedFields",)
_KOPF_PREFIX = "disagg.dev/last-handled-configuration"


def project(body: Mapping[str, Any]) -> dict[str, Any]:
    """What the cache keeps of ``body``: all but managedFields, kopf's copy of the last
    handled spec and an instance's spec (a sync reads the metadata and status of a pod or a
    LeaderWorkerSet only)."""
    instance = body.get("kind") in kinds.INSTANCE_KINDS
    out = {k: v for k, v in body.items() if not (k == "spec" and instance)}
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in _DROPPED_META}
    notes = meta.get("annotations")
    if notes and _KOPF_PREFIX in notes:
        meta["annotations"] = {k: v for k, v in notes.items() if k != _KOPF_PREFIX}
    out["metadata"] = meta
    return out


def owner(body: Mapping[str, Any]) -> Key | None:
    """(namespace, name) of the DisaggregatedDeployment controlling ``body``, if any; for
    a pod of a LeaderWorkerSet group (the LWS controls it), the deployment its labels name:
    the group is the deployment's instance, its pods say how the group fares."""
    meta = body.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == CONTROLLER_KIND and ref.get("controller"):
            return str(meta.get("namespace") or ""), str(ref["name"])
    deployment = (meta.get("labels") or {}).get(LABEL_DEPLOYMENT)
    if _group_pod(body) and deployment:
        return str(meta.get("namespace") or ""), str(deployment)
    return None


def _group_pod(body: Mapping[str, Any]) -> bool:
    """A pod of a LeaderWorkerSet group (LWS labels each with the LWS's name; its
    StatefulSets, not the deployment, control it)."""
    meta = body.get("metadata") or {}
    labels = meta.get("labels") or {}
    return body.get("kind") == "Pod" and lws.LABEL_NAME in labels


def _rv(obj: Mapping[str, Any] | None) -> int | None:
    return _int(((obj or {}).get("metadata") or {}).get("resourceVersion"))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _uid(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def caught_up(cached: Mapping[str, Any] | None, known: Mapping[str, Any] | None, uid: str) -> bool:
    """Whether the cached object is at least as new as ``known`` (None: gone, of ``uid``):
    ``resourceVersion`` compared as integers; when either is not one the cached object wins
    (a sync may then count one event late: its create answers 409 or its delete 404,
    changing nothing)."""
    if known is None:  # we deleted it: caught up once the cache lost that uid
        return cached is None or _uid(cached) != uid
    if cached is None:
        return False
    have, want = _rv(cached), _rv(known)
    return have is None or want is None or have >= want


@dataclass
class Known:
    """An object as an API answer showed it (None: gone), and when (monotonic s)."""

    obj: dict[str, Any] | None
    uid: str
    at: float


class Cache:
    """Deployments and children from watch-fed sources plus what writes answered.

    ``deployments``: (namespace, name) → the CR (one value); ``children``: one source per
    child kind, (namespace, owner name) → the owned objects (see :func:`owner`)."""

    def __init__(
        self,
        deployments: Source,
        children: Sequence[Source],
        *,
        ttl: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._deployments = deployments
        self._children = children
        self._ttl = ttl
        self._now = monotonic
        self._known: dict[Key, dict[ObjectKey, Known]] = {}
        self._hidden: set[str] = set()  # uids the cache holds but the API has not
        self._echoes: dict[tuple[str, str, str], int] = {}  # (ns, kind, name) → our answer's rv

    # ------------------------------------------------------------------ reads
    def deployments(self) -> list[Key]:
        """Every cached deployment, sorted."""
        return sorted(self._deployments)

    def deployment(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The CR, or None when the cache has none."""
        key = (namespace, name)
        cached = next(iter(self._deployments.get(key, ())), None)
        return self._merged(key, (CONTROLLER_KIND, name), cached)

    def children(self, namespace: str, name: str, uid: str) -> list[dict[str, Any]]:
        """The children deployment ``uid`` owns now, as far as this operator knows."""
        key = (namespace, name)
        seen: dict[ObjectKey, dict[str, Any]] = {}
        for source in self._children:
            for obj in source.get(key, ()):
                if _uid(obj) not in self._hidden:
                    seen[obj["kind"], obj["metadata"]["name"]] = obj
        for ident in {*seen, *self._known.get(key, {})}:
            if ident[0] == CONTROLLER_KIND:
                continue
            merged = self._merged(key, ident, seen.get(ident))
            if merged is None:
                seen.pop(ident, None)
            else:
                seen[ident] = merged
        return [o for _, o in sorted(seen.items()) if _owned(o, uid)]

    def group_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The pods of deployment ``name``'s LeaderWorkerSet groups (LWS's, not the
        deployment's: never among :meth:`children`), as the watch last showed them."""
        found: dict[str, dict[str, Any]] = {}
        for source in self._children:
            for obj in source.get((namespace, name), ()):
                if _group_pod(obj) and _uid(obj) not in self._hidden:
                    found[obj["metadata"]["name"]] = obj
        return [found[n] for n in sorted(found)]

    def _merged(
        self, key: Key, ident: ObjectKey, cached: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        entries = self._known.get(key, {})
        known = entries.get(ident)
        if known is None:
            return cached
        if self._now() - known.at > self._ttl or caught_up(cached, known.obj, known.uid):
            del entries[ident]
            if not entries:
                self._known.pop(key, None)
            return cached
        return known.obj

    # ------------------------------------------------------------------ own writes
    def wrote(self, key: Key, answer: Mapping[str, Any] | None) -> None:
        """Record the API's answer to a create or patch of an object of deployment ``key``
        (None: no object came back, e.g. 409: nothing to record)."""
        if not answer or "metadata" not in answer:
            return
        obj = project(answer)
        ident = (str(obj.get("kind") or ""), str(obj["metadata"].get("name") or ""))
        self._known.setdefault(key, {})[ident] = Known(obj, _uid(obj), self._now())
        self._expect(key[0], ident, _rv(obj))

    def _expect(self, namespace: str, ident: ObjectKey, rv: int | None) -> None:
        if rv is not None and ident[0] != CONTROLLER_KIND:
            self._echoes[(namespace, ident[0], ident[1])] = rv

    def news(self, body: Mapping[str, Any]) -> bool:
        """Whether a watch event's object tells more than the answer to our own write to
        it did (False: the echo of that write, whose answer the sync already counted)."""
        meta = body.get("metadata") or {}
        ident = (
            str(meta.get("namespace") or ""),
            str(body.get("kind") or ""),
            str(meta.get("name") or ""),
        )
        expected = self._echoes.pop(ident, None)
        return expected is None or _rv(body) != expected

    def deleted(self, key: Key, kind: str, name: str, answer: Mapping[str, Any] | None) -> None:
        """Record a delete: a terminating object (the answer carries deletionTimestamp) or
        gone (any other answer)."""
        meta = (answer or {}).get("metadata") or {}
        if answer and answer.get("kind") == kind and meta.get("deletionTimestamp"):
            self.wrote(key, answer)
            return
        if answer and answer.get("kind") == kind:
            self._expect(key[0], (kind, name), _rv(answer))
        previous = self._known.get(key, {}).get((kind, name))
        uid = _uid(answer) or (previous.uid if previous else "")
        if not uid:
            uid = next((_uid(o) for o in self._listed(key, kind, name)), "")
        self._known.setdefault(key, {})[kind, name] = Known(None, uid, self._now())

    def _listed(self, key: Key, kind: str, name: str) -> list[dict[str, Any]]:
        return [
            o
            for source in self._children
            for o in source.get(key, ())
            if o["kind"] == kind and o["metadata"]["name"] == name
        ]

    def forget(self, namespace: str, name: str) -> None:
        """Drop what was recorded for a deleted deployment."""
        self._known.pop((namespace, name), None)

    # ------------------------------------------------------------------ drift
    def correct(
        self, listed: Iterable[Mapping[str, Any]], version: str, kinds: Iterable[str]
    ) -> set[Key]:
        """Hide, from now on, every cached child of ``kinds`` that a fresh listing (taken
        at resourceVersion ``version``) lacks although the cache had it before the listing:
        an object deleted without an event reaching the watch. Returns the deployments
        concerned (to be synced: they recreate what they lost). Objects the cache lacks but
        the listing has are left to their next event or kopf's next re-list (kopf re-lists
        only after a 410 Gone, adding and updating, never removing); until then a create of
        one answers 409, which changes nothing."""
        kinds = set(kinds)
        listed_uids = {_uid(o) for o in listed}
        at = _int(version)
        hidden: set[str] = set()
        changed: set[Key] = set()
        for source in self._children:
            for key, objs in source.items():
                for obj in objs:
                    rv = _rv(obj)
                    if obj.get("kind") not in kinds or _uid(obj) in listed_uids:
                        continue
                    if at is not None and rv is not None and rv <= at:
                        hidden.add(_uid(obj))
                        changed.add(key)
        self._hidden = hidden
        return changed


def _owned(obj: Mapping[str, Any], uid: str) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("uid") == uid for ref in refs)


@dataclass
class Recorder:
    """The answers to one deployment's writes, recorded in the cache (see sync.py)."""

    cache: Cache
    key: Key

    def wrote(self, answer: Mapping[str, Any] | None) -> None:
        self.cache.wrote(self.key, answer)

    def deleted(self, kind: str, name: str, answer: Mapping[str, Any] | None) -> None:
        self.cache.deleted(self.key, kind, name, answer)
