"""Pruning: fields a structural schema does not specify are dropped, and their paths kept.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/pruning/algorithm.go`` (paths
as ``schema/options.go`` keeps them) over the raw ``openAPIV3Schema``; an embedded resource
(the root is one) keeps its ``apiVersion``, ``kind`` and ``metadata``.
"""

from __future__ import annotations

from typing import Any

_META_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
Schema = dict[str, Any] | None  # None specifies nothing


def prune(obj: Any, schema: Schema, *, is_resource_root: bool = False) -> list[str]:
    """Drop from ``obj`` (in place) what ``schema`` does not specify; the dropped paths
    (what ``fieldValidation`` reports: ``spec.ports[0].x``), sorted as Go sorts strings."""
    if is_resource_root:
        schema = {**(schema or {}), "x-kubernetes-embedded-resource": True}
    found: list[str] = []
    _prune(obj, schema, "", found)
    return sorted(found)


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _additional(schema: dict[str, Any]) -> tuple[bool, Schema]:
    """Whether ``additionalProperties`` is set, and its schema (None for a bool)."""
    if "additionalProperties" not in schema:
        return False, None
    value = schema["additionalProperties"]
    return True, value if isinstance(value, dict) else None


def _prune(value: Any, schema: Schema, path: str, found: list[str]) -> None:
    if schema is not None and schema.get("x-kubernetes-preserve-unknown-fields"):
        _skip_prune(value, schema, path, found)
    elif isinstance(value, dict):
        _prune_object(value, schema, path, found)
    elif isinstance(value, list):
        items = None if schema is None else schema.get("items")
        for i, item in enumerate(value):
            _prune(item, items, f"{path}[{i}]", found)


def _prune_object(value: dict[str, Any], schema: Schema, path: str, found: list[str]) -> None:
    if schema is None:
        found.extend(_join(path, k) for k in value)
        value.clear()
        return
    embedded = bool(schema.get("x-kubernetes-embedded-resource"))
    properties = schema.get("properties") or {}
    has_additional, additional = _additional(schema)
    for k in list(value):
        if embedded and k in _META_FIELDS:
            continue
        if k in properties:
            _prune(value[k], properties[k], _join(path, k), found)
        elif has_additional:
            _prune(value[k], additional, _join(path, k), found)
        else:
            if k not in _META_FIELDS or path:
                found.append(_join(path, k))
            del value[k]


def _skip_prune(value: Any, schema: dict[str, Any], path: str, found: list[str]) -> None:
    """Under x-kubernetes-preserve-unknown-fields: keep unknown fields, prune known ones."""
    if isinstance(value, dict):
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        properties = schema.get("properties") or {}
        has_additional, additional = _additional(schema)
        for k, v in value.items():
            if embedded and k in _META_FIELDS:
                continue
            if k in properties:
                _prune(v, properties[k], _join(path, k), found)
            elif has_additional:
                _prune(v, additional, _join(path, k), found)
    elif isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            if items is not None:
                _skip_prune(item, items, f"{path}[{i}]", found)
