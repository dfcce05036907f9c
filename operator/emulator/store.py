"""The API emulator's object store: objects by resource, resourceVersions, watch events.

Dev/bench tool, mixed into :class:`disagg_operator.emulator.server.Emulator` (which holds
its fields; the requests that reach it are the emulator's). What an API server does to
every write, and a controller relies on:

- an inserted object gets uid, creationTimestamp, generation 1 and the next resourceVersion
  of one global counter; a posted CRD is served from then on;
- a write keeps identity and bookkeeping fields, bumps generation on changes outside
  metadata/status, and, when it changes nothing, keeps the resourceVersion and emits no
  event; an object with a deletionTimestamp and no finalizers is deleted;
- a delete of an object with finalizers only sets its deletionTimestamp;
- every change is logged per resource (for watch replay) and put on each live watcher's
  queue.
"""

from __future__ import annotations

import asyncio
import collections
import uuid
from collections.abc import Iterator
from typing import Any

from disagg_operator.emulator.rules import ops

_CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


class ObjectStore:
    """Mixin: the store primitives over the emulator's ``store``, ``_index``, ``_rv``,
    ``_log`` and ``_watchers``; needs its ``register_crd``."""

    store: dict[tuple[str, str, str], dict[str, Any]]
    _index: dict[str, dict[tuple[str, str], dict[str, Any]]]
    _rv: int
    _log: dict[str, collections.deque[tuple[int, dict[str, Any]]]]
    _watchers: dict[str, set[asyncio.Queue[dict[str, Any]]]]

    def register_crd(self, crd: dict[str, Any]) -> None:
        raise NotImplementedError

    def _put(self, key: str, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        self.store[(key, ns, name)] = self._index[key][(ns, name)] = obj

    def _drop(self, key: str, obj: dict[str, Any]) -> None:
        ns, name = obj["metadata"].get("namespace", ""), obj["metadata"]["name"]
        del self.store[(key, ns, name)], self._index[key][(ns, name)]

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
        meta["resourceVersion"] = self._next_rv()
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._drop(key, new)
            self._emit(key, "DELETED", new)
            return new
        self._put(key, new)
        self._emit(key, "MODIFIED", new)
        return new

    def _remove(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return obj
            return self._commit(
                key, obj, ops.merge_patch(obj, {"metadata": {"deletionTimestamp": ops.now()}})
            )
        self._drop(key, obj)
        gone = {**obj, "metadata": {**meta, "resourceVersion": self._next_rv()}}
        self._emit(key, "DELETED", gone)
        return gone

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
