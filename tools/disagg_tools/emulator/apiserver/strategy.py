"""What kube-apiserver checks of a custom resource before it stores a write.

Ports apiextensions-apiserver v0.36.3 ``pkg/registry/customresource``: ``validator.go``,
``strategy.go`` (then list types and, unless a blocking error came first, CEL) and
``status_strategy.go``; the field errors and the warnings (ratcheted CEL failures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2

from disagg_tools.emulator.apiserver import cel, gofmt, listtype
from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver.ratcheting import CorrelatedObject
from disagg_tools.emulator.apiserver.schema_validation import SchemaCheck

_BLOCKING = {
    "FieldValueNotSupported",
    "FieldValueRequired",
    "FieldValueTooLong",
    "FieldValueTooMany",
    "FieldValueTypeInvalid",
}
_SUBDOMAIN = re2.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_MAX_INT32 = 2**31 - 1


@dataclass(frozen=True)
class Served:
    """One served version of a CRD: what its writes are checked against."""

    group: str
    version: str
    kind: str
    schema: dict[str, Any] | None
    check: SchemaCheck | None
    status_check: SchemaCheck | None
    rules: cel.CelNode | None
    has_status: bool
    scale: dict[str, Any] | None
    preserve_unknown: bool = False


def _type_meta(served: Served, obj: dict[str, Any]) -> list[fe.FieldError]:
    found = []
    if obj.get("kind") != served.kind:
        found.append(fe.invalid("kind", obj.get("kind", ""), f"must be {served.kind}"))
    expected = f"{served.group}/{served.version}"
    if obj.get("apiVersion") != expected:
        found.append(fe.invalid("apiVersion", obj.get("apiVersion", ""), f"must be {expected}"))
    return found


def _name(obj: dict[str, Any]) -> list[fe.FieldError]:
    """``ValidateObjectMetaAccessor``'s name check (``NameIsDNSSubdomain``)."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    found = []
    if len(name) > 253:
        found.append(fe.invalid("metadata.name", name, "must be no more than 253 characters"))
    if _SUBDOMAIN.search(name) is None:
        found.append(fe.invalid("metadata.name", name, _SUBDOMAIN_MESSAGE))
    return found


def _go_type(value: Any) -> str:
    """Go's ``%T`` of a decoded JSON value."""
    if value is None:
        return "<nil>"
    names = {bool: "bool", int: "int64", float: "float64", str: "string"}
    names.update({dict: "map[string]interface {}", list: "[]interface {}"})
    return names.get(type(value), type(value).__name__)


def _accessor_error(fields: list[str], value: Any, expected: str) -> str:
    where = "." + ".".join(fields)
    shown = gofmt.value_v(value)
    return f"{where} accessor error: {shown} is of the type {_go_type(value)}, expected {expected}"


def _nested(obj: dict[str, Any], path: str, want: type) -> tuple[Any, str]:
    """``unstructured.Nested{Int64,String}``: (value or None, accessor error)."""
    fields = path.removeprefix(".").split(".")
    value: Any = obj
    for i, name in enumerate(fields):
        if value is None:
            return None, ""
        if not isinstance(value, dict):
            return None, _accessor_error(fields[: i + 1], value, "map[string]interface{}")
        if name not in value:
            return None, ""
        value = value[name]
    if isinstance(value, want) and not isinstance(value, bool):
        return value, ""
    return None, _accessor_error(fields, value, "int64" if want is int else "string")


def _replicas(obj: dict[str, Any], path: str | None) -> list[fe.FieldError]:
    if not path:
        return []
    value, problem = _nested(obj, path, int)
    if problem:
        return [fe.invalid(path, 0, problem)]
    if value is not None and value < 0:
        return [fe.invalid(path, value, "should be a non-negative integer")]
    if value is not None and value > _MAX_INT32:
        return [fe.invalid(path, value, f"should be less than or equal to {_MAX_INT32}")]
    return []


def scale_errors(served: Served, obj: dict[str, Any], spec: bool = True) -> list[fe.FieldError]:
    """``ValidateScaleSpec`` (when ``spec``) and ``ValidateScaleStatus``."""
    scale = served.scale
    if scale is None:
        return []
    found = _replicas(obj, scale.get("specReplicasPath")) if spec else []
    found.extend(_replicas(obj, scale.get("statusReplicasPath")))
    selector = scale.get("labelSelectorPath")
    if selector:
        _, problem = _nested(obj, selector, str)
        if problem:
            found.append(fe.invalid(selector, "", problem))
    return found


def _with_rules(
    served: Served, errors: list[fe.FieldError], obj: Any, old: Any, correlation: Any
) -> tuple[list[fe.FieldError], list[str]]:
    """The CEL rules, unless a blocking error stands (``hasBlockingErr``)."""
    if served.rules is None:
        return errors, []
    if any(e.type in _BLOCKING for e in errors):
        message = (
            "some validation rules were not checked because the object was invalid; correct "
            "the existing errors to complete validation"
        )
        return [*errors, fe.invalid(fe.NO_PATH, None, message)], []
    outcome = cel.validate(served.rules, obj, old, correlation)
    return [*errors, *outcome.errors], outcome.warnings


def validate_create(served: Served, obj: dict[str, Any]) -> tuple[list[fe.FieldError], list[str]]:
    """``customResourceStrategy.Validate``."""
    errors = _type_meta(served, obj)
    if not errors:
        errors = _name(obj)
        if served.check is not None:
            errors.extend(served.check.validate(obj))
        errors.extend(scale_errors(served, obj))
    errors.extend(listtype.validate(served.schema, obj))
    return _with_rules(served, errors, obj, None, None)


def validate_update(
    served: Served, obj: dict[str, Any], old: dict[str, Any]
) -> tuple[list[fe.FieldError], list[str]]:
    """``customResourceStrategy.ValidateUpdate``, ratcheting."""
    correlation = CorrelatedObject(obj, old, served.schema)
    errors = _type_meta(served, obj)
    if not errors:
        if served.check is not None:
            errors.extend(served.check.validate_update(obj, old, correlation=correlation))
        errors.extend(scale_errors(served, obj))
    if not listtype.validate(served.schema, old):
        errors.extend(listtype.validate(served.schema, obj))
    return _with_rules(served, errors, obj, old, correlation)


def validate_status(
    served: Served, obj: dict[str, Any], old: dict[str, Any]
) -> tuple[list[fe.FieldError], list[str]]:
    """``statusStrategy.ValidateUpdate``: the status schema (ratcheting), then the rules."""
    correlation = CorrelatedObject(obj, old, served.schema)
    errors = _type_meta(served, obj)
    if not errors:
        if served.status_check is not None and "status" in obj:
            sub = correlation.key("status") if served.schema is not None else None
            errors.extend(
                served.status_check.validate_update(obj["status"], old.get("status"), "status", sub)
            )
        errors.extend(scale_errors(served, obj, spec=False))
    new_list_errors = listtype.validate(served.schema, obj)
    if new_list_errors and not listtype.validate(served.schema, old):
        errors.extend(new_list_errors)
    return _with_rules(served, errors, obj, old, correlation)
