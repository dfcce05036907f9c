"""Validation ratcheting: an error in a value an update left unchanged does not block it.

Ports apiserver v0.36.3 ``pkg/cel/common/equality.go`` (``CorrelatedObject``) and
``maplist.go`` (a list-type map's items correlate by their keys; other lists never), as
apiextensions-apiserver v0.36.3 ``pkg/apiserver/validation/ratcheting.go`` uses them.
"""

from __future__ import annotations

from typing import Any

from disagg_tools.emulator.apiserver.defaulting import field_schema
from disagg_tools.emulator.apiserver.openapi_result import json_equal

Schema = dict[str, Any]


def _scalar_key(value: Any) -> Any:
    """A hashable key that keeps Go's types apart (``True`` is not ``1``, ``1`` not ``1.0``)."""
    if isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, value)
    return None


class MapList:
    """``MakeMapList``: the old items of a list-type map, found by the new item's keys."""

    def __init__(self, schema: Schema | None, items: list[Any]) -> None:
        keys = (schema or {}).get("x-kubernetes-list-map-keys") or []
        schema = schema or {}
        usable = schema.get("type") == "array" and schema.get("x-kubernetes-list-type") == "map"
        usable = usable and bool(keys) and bool(items)
        self.keys: list[str] = list(keys) if usable else []
        self.keyed: dict[Any, Any] = {}
        self.unkeyed = list(items) if usable else []

    def _key(self, obj: dict[str, Any]) -> Any:
        if len(self.keys) == 1:
            return _scalar_key(obj.get(self.keys[0])) if self.keys[0] in obj else None
        parts = []
        for name in self.keys:
            if name not in obj or _scalar_key(obj[name]) is None:
                return None
            parts.append(_scalar_key(obj[name]))
        return tuple(parts)

    def get(self, obj: Any) -> Any:
        """The first old item with the keys of ``obj``, or None."""
        if not self.keys or not isinstance(obj, dict):
            return None
        key = self._key(obj)
        if key is None:
            return None
        if key in self.keyed:
            return self.keyed[key]
        while self.unkeyed:
            item = self.unkeyed.pop(0)
            if not isinstance(item, dict):
                continue
            item_key = self._key(item)
            if item_key is None:
                continue
            self.keyed.setdefault(item_key, item)
            if item_key == key:
                return item
        return None


class CorrelatedObject:
    """A new value, the old value it replaces (when one corresponds), and its schema."""

    def __init__(self, new: Any, old: Any, schema: Schema | None) -> None:
        self.value, self.old, self.schema = new, old, schema
        self._equal: bool | None = None
        self._map_list: MapList | None = None
        self._children: dict[Any, CorrelatedObject | None] = {}

    def key(self, name: str) -> CorrelatedObject | None:
        """The child for field ``name``, when both values have it and a schema describes it
        (a field none describes never correlates: its object never counts as unchanged)."""
        if self.schema is None:
            return None
        if name in self._children:
            return self._children[name]
        if not isinstance(self.value, dict) or not isinstance(self.old, dict):
            return None
        if name not in self.value or name not in self.old:
            return None
        sub = field_schema(name, self.schema)
        if sub is None:
            return None
        child = self._children[name] = CorrelatedObject(self.value[name], self.old[name], sub)
        return child

    def index(self, i: int) -> CorrelatedObject | None:
        """The child for item ``i``: only a list-type map's items have an old one."""
        if self.schema is None:
            return None
        if i in self._children:
            return self._children[i]
        if not isinstance(self.value, list) or i >= len(self.value):
            return None
        old = self._old_item(i)
        items = self.schema.get("items")
        if old is None or not isinstance(items, dict):
            return None
        child = self._children[i] = CorrelatedObject(self.value[i], old, items)
        return child

    def _old_item(self, i: int) -> Any:
        if not isinstance(self.old, list) or not isinstance(self.value, list):
            return None
        if (self.schema or {}).get("x-kubernetes-list-type") != "map":
            return None
        if self._map_list is None:
            self._map_list = MapList(self.schema, self.old)
        return self._map_list.get(self.value[i])

    def unchanged(self) -> bool:
        """``CachedDeepEqual``: equal through correlated children, computed once."""
        if self._equal is None:
            self._equal = self._compare()
        return self._equal

    def _compare(self) -> bool:
        new, old = self.value, self.old
        if new is None or old is None:
            return new is None and old is None
        if isinstance(new, list) != isinstance(old, list):
            return False
        if isinstance(new, dict) != isinstance(old, dict):
            return False
        if isinstance(new, list):
            if len(new) != len(old):
                return False
            for i in range(len(new)):
                child = self.index(i)
                if child is None:
                    return self._map_list is None and json_equal(old, new)
                if not child.unchanged():
                    return False
            return True
        if isinstance(new, dict):
            if len(new) != len(old):
                return False
            return all((c := self.key(k)) is not None and c.unchanged() for k in new)
        return json_equal(old, new)


def unchanged(correlation: CorrelatedObject | None) -> bool:
    """A missing correlation is a changed value (Go's nil receiver)."""
    return correlation is not None and correlation.unchanged()
