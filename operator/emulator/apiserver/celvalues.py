"""A custom resource's values as CEL sees them: typed by the schema, not by the JSON.

Restates apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/cel``
``values.go`` (``UnstructuredToVal``) and ``model.WithTypeAndObjectMeta`` for cel-python:
a ``number`` field is a double even when the JSON holds ``2`` (so ``self.min <= self.max``
compares a double with a double, as in kube-apiserver), an ``integer`` an int, an
int-or-string whichever it holds, a ``date-time`` string a timestamp, a ``duration`` a
duration, a ``byte`` string bytes; at the resource root ``metadata`` shows only ``name``
and ``generateName``. Fields the schema does not describe (preserved unknown fields) keep
their JSON types.
"""

from __future__ import annotations

import base64
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel

Schema = dict[str, Any] | None


def _string(value: str, fmt: str) -> Any:
    if fmt == "date-time":
        try:
            return celtypes.TimestampType(value)
        except ValueError:
            return celtypes.StringType(value)
    if fmt == "duration":
        try:
            return celtypes.DurationType(value)
        except ValueError:
            return celtypes.StringType(value)
    if fmt == "byte":
        try:
            return celtypes.BytesType(base64.b64decode(value))
        except ValueError:
            return celtypes.StringType(value)
    return celtypes.StringType(value)


def _scalar(value: Any, schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if isinstance(value, bool) or kind == "boolean":
        return json_to_cel(value)
    if kind == "number" and isinstance(value, (int, float)):
        return celtypes.DoubleType(float(value))
    if kind == "integer" and isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, str):
        return _string(value, str(schema.get("format") or ""))
    return json_to_cel(value)


def to_cel(value: Any, schema: Schema) -> Any:
    """``value`` as a cel-python value typed by ``schema`` (None: untyped JSON)."""
    if value is None or schema is None:
        return json_to_cel(value)
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        additional = additional if isinstance(additional, dict) else None
        return celtypes.MapType(
            {
                celtypes.StringType(k): to_cel(v, properties.get(k, additional))
                for k, v in value.items()
            }
        )
    if isinstance(value, list):
        items = schema.get("items")
        return celtypes.ListType(
            [to_cel(v, items if isinstance(items, dict) else None) for v in value]
        )
    return _scalar(value, schema)


def root_to_cel(value: Any, schema: Schema) -> Any:
    """The resource root: ``apiVersion``, ``kind`` and ``metadata.name``/``generateName``."""
    if not isinstance(value, dict):
        return to_cel(value, schema)
    meta = value.get("metadata")
    shown = dict(value)
    if isinstance(meta, dict):
        shown["metadata"] = {k: meta[k] for k in ("name", "generateName") if k in meta}
    schema = {**(schema or {}), "properties": {**((schema or {}).get("properties") or {})}}
    schema["properties"]["metadata"] = {"type": "object"}
    return to_cel(shown, schema)
