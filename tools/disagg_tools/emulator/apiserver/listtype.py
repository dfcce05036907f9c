"""``x-kubernetes-list-type``: a set holds each item once, a map each key once.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/listtype/validation.go``: one
``Duplicate value`` per repeated item, compared as Go compares them (``1`` is not ``1.0``;
objects and lists by their ``json.Marshal`` text).
"""

from __future__ import annotations

from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import gofmt

Schema = dict[str, Any] | None
_UNSPECIFIED = object()  # a list-map item without the key: all such items share a key


def validate(schema: Schema, obj: Any, path: str = "") -> list[fe.FieldError]:
    """``ValidateListSetsAndMaps`` of the object ``obj`` under ``schema``."""
    if schema is None or not isinstance(obj, dict):
        return []
    found: list[fe.FieldError] = []
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        for k, v in obj.items():
            found.extend(_value(additional, v, fe.key(path, k)))
    properties = schema.get("properties") or {}
    for k, v in obj.items():
        if k in properties:
            found.extend(_value(properties[k], v, fe.child(path, k)))
    return found


def _value(schema: dict[str, Any], value: Any, path: str) -> list[fe.FieldError]:
    if isinstance(value, list):
        return _array(schema, value, path)
    if isinstance(value, dict):
        return validate(schema, value, path)
    return []


def _array(schema: dict[str, Any], items: list[Any], path: str) -> list[fe.FieldError]:
    found: list[fe.FieldError] = []
    kind = schema.get("x-kubernetes-list-type")
    if kind == "set":
        found.extend(fe.duplicate(fe.index(path, i), items[i]) for i in _repeats(items))
    elif kind == "map":
        found.extend(_map(schema, items, path))
    item_schema = schema.get("items")
    if isinstance(item_schema, dict):
        for i, item in enumerate(items):
            found.extend(_value(item_schema, item, fe.index(path, i)))
    return found


def _identity(value: Any) -> Any:
    if value is _UNSPECIFIED:
        return ("unspecified",)
    if isinstance(value, (dict, list)):
        return ("json", gofmt.json_marshal(value))
    return (type(value).__name__, value)


def _repeats(items: list[Any]) -> list[int]:
    """``validateListSet``: the index of each value's second occurrence."""
    seen: dict[Any, int] = {}
    repeats = []
    for i, item in enumerate(items):
        ident = _identity(item)
        seen[ident] = seen.get(ident, 0) + 1
        if seen[ident] == 2:
            repeats.append(i)
    return repeats


def _map(schema: dict[str, Any], items: list[Any], path: str) -> list[fe.FieldError]:
    for i, item in enumerate(items):
        if item is not None and not isinstance(item, dict):
            message = "must be an object for an array of list-type map"
            return [fe.invalid(fe.index(path, i), item, message)]
    if len(items) <= 1:
        return []
    names = list(schema.get("x-kubernetes-list-map-keys") or [])
    if len(names) == 1:
        name = names[0]
        keys = [(item or {}).get(name, _UNSPECIFIED) for item in items]
        shown = [{} if k is _UNSPECIFIED else {name: k} for k in keys]
    else:
        shown = [{n: (item or {})[n] for n in names if n in (item or {})} for item in items]
        keys = list(shown)
    return [fe.duplicate(fe.index(path, i), shown[i]) for i in _repeats(keys)]
