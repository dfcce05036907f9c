"""Running a schema's CEL rules on a value (kube-apiserver checks every default this way).

Pure layer. Ports the walk of apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/cel/
validation.go`` (``Validator.validate``: rules at each node of a value, transition rules
only with an old value, a failed rule's message, messageExpression and reason), evaluating
with cel-python. cel-python lacks Kubernetes' CEL libraries: the string and list
extensions and optional ``oldSelf`` are supplied here; a rule calling anything else
(quantity, url, ip, semver, format ...) is not evaluated, and :func:`unevaluated` names it.
Values keep their JSON types (upstream types them by the schema: a ``number`` holding 2 is
a double there), and the runtime cost budget is not kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from disagg_operator.emulator.apiserver import cel_compile, cel_types
from disagg_operator.emulator.apiserver import field as f
from disagg_operator.emulator.apiserver.cel_parse import CelSyntaxError, Expr, children, parse
from disagg_operator.emulator.apiserver.field import OMIT, FieldError
from disagg_operator.emulator.apiserver.structural import Structural

_ENV = celpy.Environment()


class _Optional:
    def __init__(self, value: Any) -> None:
        self.value = value


def _has_value(o: _Optional) -> celtypes.BoolType:
    return celtypes.BoolType(o.value is not None)


def _value(o: _Optional) -> Any:
    if o.value is None:
        raise ValueError("optional.none() dereference")
    return o.value


def _or_value(o: _Optional, default: Any) -> Any:
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


_FUNCTIONS: dict[str, Callable[..., Any]] = {
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
_NATIVE = {
    "_&&_",
    "_||_",
    "!_",
    "-_",
    "_==_",
    "_!=_",
    "_<_",
    "_<=_",
    "_>_",
    "_>=_",
    "_+_",
    "_-_",
    "_*_",
    "_/_",
    "_%_",
    "_?_:_",
    "_[_]",
    "@in",
    "@not_strictly_false",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "duration",
    "timestamp",
    "type",
    "dyn",
}


def unevaluated(text: str) -> set[str]:
    """The functions in ``text`` this evaluator cannot run (empty: it can)."""
    try:
        expr = parse(text)
    except CelSyntaxError:
        return set()
    return {name for name in _calls(expr) if name not in _NATIVE and name not in _FUNCTIONS}


def _calls(expr: Expr) -> set[str]:
    names = {str(expr.value)} if expr.kind == "call" else set()
    for sub in children(expr):
        names |= _calls(sub)
    return names


def validate(
    path: str, s: Structural | None, value: Any, old: Any, is_root: bool
) -> list[FieldError]:
    """The errors of every rule at and below ``s`` on ``value`` (``old``: its old value)."""
    if s is None or value is None:
        return []
    errs = _node(path, s, value, old, is_root)
    if isinstance(value, dict):
        for key in sorted(value):
            if s.properties is not None and key in s.properties:
                sub = s.properties[key]
                errs += validate(
                    f.child(path, key),
                    sub,
                    value[key],
                    _get(old, key, s),
                    sub.extensions.embedded_resource,
                )
            elif s.additional_properties is not None and s.additional_properties.structural:
                sub = s.additional_properties.structural
                errs += validate(
                    f.key(path, key),
                    sub,
                    value[key],
                    _get(old, key, s),
                    sub.extensions.embedded_resource,
                )
    elif isinstance(value, list) and s.items is not None:
        for i, item in enumerate(value):
            errs += validate(
                f.index(path, i), s.items, item, None, s.items.extensions.embedded_resource
            )
    return errs


def _get(old: Any, key: str, s: Structural) -> Any:
    correlatable = s.extensions.map_type in (None, "granular", "atomic")
    return old.get(key) if correlatable and isinstance(old, dict) else None


def _node(path: str, s: Structural, value: Any, old: Any, is_root: bool) -> list[FieldError]:
    rules = list(s.x_validations or [])
    if not rules:
        return []
    decl = cel_types.schema_decl_type(s, is_root)
    if decl is None:
        return []
    errs: list[FieldError] = []
    self_value = json_to_cel(value)
    old_value = json_to_cel(old) if old is not None else None
    for rule, result in zip(rules, cel_compile.compile_rules(rules, decl), strict=True):
        text = str(rule.get("rule") or "")
        if result.error is not None:
            errs.append(f.invalid(path, s.type, f"rule compile error: {result.error.detail}"))
            continue
        if not text.strip() or unevaluated(text):
            continue
        optional = bool(rule.get("optionalOldSelf"))
        if result.uses_old_self and old is None and not optional:
            continue
        activation = {
            "self": self_value,
            "oldSelf": _Optional(old_value) if optional else old_value,
        }
        errs += _run(path, s, rule, value, activation)
    return errs


def _run(
    path: str, s: Structural, rule: dict[str, Any], value: Any, activation: dict[str, Any]
) -> list[FieldError]:
    text = str(rule["rule"])
    try:
        outcome = _ENV.program(_ENV.compile(text), functions=_FUNCTIONS).evaluate(activation)
    except Exception as exc:  # cel-python reports evaluation errors as exceptions
        return [
            f.invalid(
                path, s.type, f"{_runtime_message(exc)} evaluating rule: {_rule_string(rule)}"
            )
        ]
    if isinstance(outcome, CELEvalError):
        return [
            f.invalid(
                path, s.type, f"{_runtime_message(outcome)} evaluating rule: {_rule_string(rule)}"
            )
        ]
    if bool(outcome):
        return []
    at = f.child(path, str(rule["fieldPath"]).lstrip(".")) if rule.get("fieldPath") else path
    detail = _message(rule, activation)
    shown = OMIT if s.type in ("object", "array") else value
    reason = rule.get("reason")
    if reason == "FieldValueForbidden":
        return [f.forbidden(at, detail)]
    if reason == "FieldValueRequired":
        return [f.required(at, detail)]
    if reason == "FieldValueDuplicate":
        return [f.duplicate(at, shown)]
    return [f.invalid(at, shown, detail)]


def _message(rule: dict[str, Any], activation: dict[str, Any]) -> str:
    expression = str(rule.get("messageExpression") or "")
    if expression and not unevaluated(expression):
        try:
            text = _ENV.program(_ENV.compile(expression), functions=_FUNCTIONS).evaluate(activation)
        except Exception:  # upstream falls back to the message when the expression fails
            text = None
        if isinstance(text, str) and text.strip() and "\n" not in text:
            return text.strip()
    message = str(rule.get("message") or "")
    return message.strip() if message else f"failed rule: {_rule_string(rule)}"


def _rule_string(rule: dict[str, Any]) -> str:
    message = str(rule.get("message") or "")
    return message.strip() if message else str(rule.get("rule") or "").strip()


def _runtime_message(exc: Any) -> str:
    text = str(exc.args[0]) if getattr(exc, "args", None) else str(exc)
    if text.startswith("no such member in mapping: "):
        return "no such key: " + text.removeprefix("no such member in mapping: ").strip("'")
    if "index out of range" in str(exc) or text == "invalid_argument":
        return "index out of bounds"
    if "divide by zero" in text:
        return "division by zero"
    return text
