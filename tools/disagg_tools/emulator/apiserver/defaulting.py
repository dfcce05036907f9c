"""Defaulting, and what happens to nulls before it.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/defaulting/algorithm.go``
(``Default``) and ``prunenulls.go`` over the raw ``openAPIV3Schema``: ``kvTransfer: null``
with ``default: {}`` becomes ``{}``, then gets ``kvTransfer``'s own defaults.
"""

from __future__ import annotations

import copy
from typing import Any

Schema = dict[str, Any] | None


def _non_nullable_null(value: Any, schema: Schema) -> bool:
    return value is None and schema is not None and not schema.get("nullable", False)


def field_schema(name: str, schema: Schema) -> Schema:
    """The schema of a field: its property, else ``additionalProperties`` when a schema."""
    if schema is None:
        return None
    properties: dict[str, Any] = schema.get("properties") or {}
    if name in properties:
        found: dict[str, Any] = properties[name]
        return found
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, dict) else None


def default(value: Any, schema: Schema) -> None:
    """Fill ``value`` (in place) with the defaults of ``schema``, deep-copied."""
    if schema is None:
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name, prop in properties.items():
            if prop.get("default") is None:  # a null default is none (Go's nil)
                continue
            if name not in value or _non_nullable_null(value[name], prop):
                value[name] = copy.deepcopy(prop["default"])
        additional = schema.get("additionalProperties")
        additional = additional if isinstance(additional, dict) else None
        for name in value:
            if name in properties:
                default(value[name], properties[name])
            elif "additionalProperties" in schema:
                if _non_nullable_null(value[name], additional):
                    value[name] = copy.deepcopy((additional or {}).get("default"))
                default(value[name], additional)
    elif isinstance(value, list):
        items = schema.get("items")
        for i, item in enumerate(value):
            if _non_nullable_null(item, items):
                value[i] = copy.deepcopy((items or {}).get("default"))
            default(value[i], items)


def prune_non_nullable_nulls(value: Any, schema: Schema) -> None:
    """Drop (in place) nulls of fields neither ``nullable`` nor defaulted; defaulted ones
    stay for :func:`default`, nulls in lists stay for validation."""
    if isinstance(value, dict):
        for name in list(value):
            sub = field_schema(name, schema)
            if _non_nullable_null(value[name], sub) and (sub or {}).get("default") is None:
                del value[name]
            else:
                prune_non_nullable_nulls(value[name], sub)
    elif isinstance(value, list):
        items = None if schema is None else schema.get("items")
        for item in value:
            prune_non_nullable_nulls(item, items)
