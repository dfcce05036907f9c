"""The API emulator's object store: objects by resource, resourceVersions, watch events.

Dev/bench tool, mixed into :class:`disagg_tools.emulator.server.Emulator` (which holds
its fields; the requests that reach it are the emulator's). It does to every write what an
API server does and a controller relies on (identity, resourceVersions, generation,
no-op writes, finalizers, watch events, garbage collection by owner reference), since a
more lenient store would pass operators a cluster would break: :class:`ObjectStore`.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Iterator
from typing import Any

from disagg_tools.emulator.rules import gc, ops

_CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


class ObjectStore:
    """Mixin: the store primitives over the emulator's ``store``, ``_index``, ``_rv``,
    ``_log`` and ``_watchers``; needs its ``register_crd``.

    An inserted object gets uid, creationTimestamp, generation 1 and the next
    resourceVersion of one global counter; a posted CRD is served from then on. A write
    keeps identity and bookkeeping fields, bumps generation on changes outside
    metadata/status and, when it changes nothing, keeps the resourceVersion and emits no
    event; an object with a deletionTimestamp and no finalizers is deleted, and a delete of
    one with finalizers only sets its deletionTimestamp. Every change is logged per resource
    (watch replay) and queued to each live watcher. Garbage collection by owner reference
    is kube-controller-manager's (verdicts: :mod:`.rules.gc`): a delete propagates in the
    background (the default), the foreground (the owner waits, with the
    ``foregroundDeletion`` finalizer, for its blocking dependents) or orphans them; an
    object whose owners are all gone (or another object by now: a uid mismatch) is
    collected when written. The collector runs right after the write that calls for it, so
    a watcher sees the owner's event first."""

    store: dict[tuple[str, str, str], dict[str, Any]]
    _index: dict[str, dict[tuple[str, str], dict[str, Any]]]
    _rv: int
    _log: dict[str, collections.deque[tuple[int, dict[str, Any]]]]
    _watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]]
    # owner uid → the objects referencing it, for the garbage collector
    _dependents: dict[str, set[tuple[str, str, str]]]
    resources: Any  # kmock's: resource key → ResourceInfo

    def register_crd(self, crd: dict[str, Any]) -> None:
        raise NotImplementedError

    def _put(self, key: str, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        old = self.store.get((key, ns, name))
        self._unindex(key, old)
        self.store[(key, ns, name)] = self._index[key][(ns, name)] = obj
        for ref in gc.refs(obj):
            self._dependents.setdefault(str(ref.get("uid")), set()).add((key, ns, name))

    def _drop(self, key: str, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        self._unindex(key, self.store.get((key, ns, name)))
        del self.store[(key, ns, name)], self._index[key][(ns, name)]

    def _unindex(self, key: str, obj: dict[str, Any] | None) -> None:
        if obj is None:
            return
        where = (key, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
        for ref in gc.refs(obj):
            held = self._dependents.get(str(ref.get("uid")))
            if held is not None:
                held.discard(where)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _emit(self, key: str, kind: str, obj: dict[str, Any]) -> None:
        event = {"type": kind, "object": obj}
        self._log[key].append((int(obj["metadata"]["resourceVersion"]), event))
        for queue in self._watchers[key]:
            queue.put_nowait(event)

    def _insert(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=ops.now(), generation=1)
        meta["resourceVersion"] = self._next_rv()
        meta.pop("deletionTimestamp", None)
        self._put(key, obj)
        if key == _CRDS:
            self.register_crd(obj)
        self._emit(key, "ADDED", obj)
        if gc.refs(obj):
            self._collect([(key, meta.get("namespace", ""), meta["name"])])
        return obj

    def _commit(self, key: str, old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
        """Store ``new`` in place of ``old``; a no-op keeps the resourceVersion, emits nothing."""
        keep = ("uid", "creationTimestamp", "name", "namespace", "generation", "resourceVersion")
        # A merge patch shares untouched sub-dicts with ``old``: give ``new`` its own
        # metadata, or the new resourceVersion would show in ``old``'s pending watch event.
        meta = new["metadata"] = dict(new.get("metadata") or {})
        for field in keep:
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
            else:
                meta.pop(field, None)
        if new == old:
            return old
        if ops.spec_changed(old, new):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        moved = gc.refs(new) != gc.refs(old)
        meta["resourceVersion"] = self._next_rv()
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._drop(key, new)
            self._emit(key, "DELETED", new)
            self._dropped(new)
            return new
        self._put(key, new)
        self._emit(key, "MODIFIED", new)
        if moved and gc.refs(new):  # a new owner reference may name an absent owner
            self._collect([(key, meta.get("namespace", ""), meta["name"])])
        return self._find(key, new) or new

    def _remove(
        self, key: str, obj: dict[str, Any], policy: gc.Policy = "Background"
    ) -> dict[str, Any]:
        """Delete ``obj`` as the API server does, then let the collector act. Orphan and
        Foreground on an object with dependents first mark it (deletionTimestamp and the
        policy's finalizer): its dependents are orphaned, or deleted while they block it,
        and the mark is lifted when nothing holds it. An object with other finalizers
        only gets its deletionTimestamp."""
        meta = obj["metadata"]
        uid = str(meta.get("uid"))
        dependents = sorted(self._dependents.get(uid, ()))
        if policy != "Background" and dependents:
            marker = gc.ORPHAN if policy == "Orphan" else gc.FOREGROUND
            if marker not in gc.finalizers(obj):
                mark = {
                    "finalizers": [*gc.finalizers(obj), marker],
                    "deletionTimestamp": meta.get("deletionTimestamp") or ops.now(),
                }
                obj = self._commit(key, obj, ops.merge_patch(obj, {"metadata": mark}))
            for where in dependents:
                dependent = self.store.get(where)
                if dependent is None:
                    continue
                if policy == "Orphan":
                    self._commit(where[0], dependent, gc.without_refs(dependent, (uid,)))
                else:
                    self._collect([where])
            self._finish(key, obj)
            return self._find(key, obj) or obj
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            return self._commit(
                key, obj, ops.merge_patch(obj, {"metadata": {"deletionTimestamp": ops.now()}})
            )
        self._drop(key, obj)
        gone = {**obj, "metadata": {**meta, "resourceVersion": self._next_rv()}}
        self._emit(key, "DELETED", gone)
        self._dropped(obj)
        return gone

    # ---------------------------------------------------------------- garbage collector
    def _find(self, key: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        meta = obj["metadata"]
        return self.store.get((key, meta.get("namespace", ""), meta["name"]))

    def _owner(
        self, api_version: str, kind: str, ns: str, name: str
    ) -> tuple[str, dict[str, Any]] | None:
        """(resource key, live object) an owner reference names by kind and name (the
        caller checks the uid); a cluster-scoped kind is looked up without a namespace."""
        for resource, info in self.resources.items():
            group_version = "/".join(p for p in (resource.group, resource.version) if p)
            if group_version == api_version and getattr(info, "kind", None) == kind:
                key = f"{group_version}/{resource.plural}"
                found = self.store.get((key, ns if info.namespaced else "", name))
                if found is not None:
                    return key, found
        return None

    def _lookup(self, api_version: str, kind: str, ns: str, name: str) -> dict[str, Any] | None:
        found = self._owner(api_version, kind, ns, name)
        return found[1] if found else None

    def _collect(self, todo: list[tuple[str, str, str]]) -> None:
        """Act on the collector's verdict for each object of ``todo``."""
        for where in todo:
            obj = self.store.get(where)
            if obj is None:
                continue
            uid = str(obj["metadata"].get("uid"))
            verdict = gc.verdict(obj, self._lookup, bool(self._dependents.get(uid)))
            if verdict.action == "unref":
                self._commit(where[0], obj, gc.without_refs(obj, verdict.unref))
            elif verdict.action == "delete":
                self._remove(where[0], obj, verdict.policy)

    def _dropped(self, obj: dict[str, Any]) -> None:
        """After ``obj`` is gone: collect its dependents, and finish each owner that was
        waiting for it in the foreground."""
        self._collect(sorted(self._dependents.pop(str(obj["metadata"].get("uid")), ())))
        namespace = obj["metadata"].get("namespace", "")
        for ref in gc.refs(obj):
            api_version, kind = str(ref.get("apiVersion")), str(ref.get("kind"))
            found = self._owner(api_version, kind, namespace, ref["name"])
            mine = found is not None and found[1]["metadata"].get("uid") == ref.get("uid")
            if found is not None and mine and gc.deleting_dependents(found[1]):
                self._finish(*found)

    def _finish(self, key: str, owner: dict[str, Any]) -> None:
        """Lift the orphan or foreground mark of ``owner`` once nothing holds it (no
        blocking dependent left): the object goes when no other finalizer is left."""
        live = self._find(key, owner)
        if live is None or not {gc.FOREGROUND, gc.ORPHAN} & set(gc.finalizers(live)):
            return
        uid = str(live["metadata"].get("uid"))
        held = [self.store[w] for w in sorted(self._dependents.get(uid, ())) if w in self.store]
        if gc.FOREGROUND in gc.finalizers(live) and gc.blocking(held, uid):
            return
        kept = [f for f in gc.finalizers(live) if f not in (gc.FOREGROUND, gc.ORPHAN)]
        self._commit(key, live, ops.merge_patch(live, {"metadata": {"finalizers": kept or None}}))

    def _select(self, key: str, namespace: str, params: Any) -> Iterator[dict[str, Any]]:
        objs = self._index[key]
        for ns, name in sorted(objs):
            if (not namespace or ns == namespace) and self._matches(objs[ns, name], params):
                yield objs[ns, name]

    @staticmethod
    def _matches(obj: dict[str, Any], params: Any) -> bool:
        labels = obj.get("metadata", {}).get("labels")
        return ops.selector_matches(params.get("labelSelector"), labels) and (
            ops.field_selector_matches(params.get("fieldSelector"), obj)
        )
