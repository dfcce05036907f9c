"""cel-python made to run as kube-apiserver's CEL: values typed by the schema, more functions.

Restates apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/cel/values.go``
(``UnstructuredToVal``: a ``number`` holding 2 is a double) and the strings, lists and
optional libraries of apiserver v0.36.3 ``pkg/cel/environment/base.go`` that rules call.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError, base_functions

from disagg_tools.emulator.apiserver.cel_parse import CelSyntaxError, Expr, children, parse

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


# --- the library: what kube-apiserver's environment has and cel-python lacks ---------------


class CelOptional:
    """``optional.of(x)`` / ``optional.none()`` (``value`` None): ``oldSelf`` of an
    ``optionalOldSelf`` rule."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _has_value(o: CelOptional) -> celtypes.BoolType:
    return celtypes.BoolType(o.value is not None)


def _value(o: CelOptional) -> Any:
    if o.value is None:
        raise ValueError("optional.none() dereference")
    return o.value


def _or_value(o: CelOptional, default: Any) -> Any:
    return o.value if o.value is not None else default


def _s(x: Any) -> celtypes.StringType:
    return celtypes.StringType(x)


def _true(x: Any) -> bool:
    return isinstance(x, celtypes.BoolType) and bool(x)


def _false(x: Any) -> bool:
    return isinstance(x, celtypes.BoolType) and not bool(x)


def _error_of(a: Any, b: Any) -> Any:
    return a if isinstance(a, CELEvalError) else b if isinstance(b, CELEvalError) else None


def _or(a: Any, b: Any) -> Any:
    """CEL's ``||``: true wins over an error, as in cel-go (cel-python rejects errors)."""
    if _true(a) or _true(b):
        return celtypes.BoolType(True)
    return _error_of(a, b) or celtypes.BoolType(False)


def _and(a: Any, b: Any) -> Any:
    if _false(a) or _false(b):
        return celtypes.BoolType(False)
    return _error_of(a, b) or celtypes.BoolType(True)


def _not(a: Any) -> Any:
    return a if isinstance(a, CELEvalError) else celtypes.BoolType(not a)


def _split(text: Any, sep: Any, limit: Any = -1) -> celtypes.ListType:
    """ext.Strings ``split``: a limit of 0 gives no parts, a negative one all of them."""
    n = int(limit)
    parts = [] if n == 0 else str(text).split(str(sep), n - 1 if n > 0 else -1)
    return celtypes.ListType(_s(p) for p in parts)


def _index_of(where: Any, what: Any, start: Any = 0) -> celtypes.IntType:
    if isinstance(where, list):
        return celtypes.IntType(next((i for i, x in enumerate(where) if x == what), -1))
    return celtypes.IntType(str(where).find(str(what), int(start)))


def _last_index_of(where: Any, what: Any) -> celtypes.IntType:
    if isinstance(where, list):
        found = [i for i, x in enumerate(where) if x == what]
        return celtypes.IntType(found[-1] if found else -1)
    return celtypes.IntType(str(where).rfind(str(what)))


def _sum(items: Any) -> Any:
    return sum(items[1:], items[0]) if items else celtypes.IntType(0)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "_||_": _or,
    "_&&_": _and,
    "!_": _not,
    "hasValue": _has_value,
    "value": _value,
    "orValue": _or_value,
    "lowerAscii": lambda s: _s(str(s).lower()),
    "upperAscii": lambda s: _s(str(s).upper()),
    "trim": lambda s: _s(str(s).strip()),
    "charAt": lambda s, i: _s(str(s)[int(i) : int(i) + 1]),
    "split": _split,
    "join": lambda items, sep="": _s(str(sep).join(str(x) for x in items)),
    "replace": lambda s, a, b, n=-1: _s(str(s).replace(str(a), str(b), int(n))),
    "substring": lambda s, a, b=None: _s(str(s)[int(a) : None if b is None else int(b)]),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "isSorted": lambda items: celtypes.BoolType(list(items) == sorted(items)),
    "sum": _sum,
    "min": min,
    "max": max,
}
# what cel-python runs itself: its base functions, under cel-go's names for membership and a
# comprehension's loop condition
_NATIVE = frozenset(base_functions) | {"@in", "@not_strictly_false", "dyn"}


def missing_functions(text: str) -> set[str]:
    """The functions ``text`` calls that neither cel-python nor :data:`FUNCTIONS` carry."""
    try:
        expr = parse(text)
    except CelSyntaxError:
        return set()
    return {name for name in _calls(expr) if name not in _NATIVE and name not in FUNCTIONS}


def _calls(expr: Expr) -> set[str]:
    names = {str(expr.value)} if expr.kind == "call" else set()
    for sub in children(expr):
        names |= _calls(sub)
    return names
