"""Schema validation of a custom resource and its ratcheting, reported as field errors.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/validation/validation.go``
(``ValidateCustomResource[Update]``, ``kubeOpenAPIResultToFieldErrors``: a plain error lands
at ``<nil>``) and ``ratcheting.go`` (errors in a value an update left unchanged are warnings).
"""

from __future__ import annotations

from typing import Any

from disagg_tools.emulator.apiserver import fielderrors as fe
from disagg_tools.emulator.apiserver import gofmt
from disagg_tools.emulator.apiserver import openapi_result as r
from disagg_tools.emulator.apiserver.openapi import Node, compile_schema
from disagg_tools.emulator.apiserver.openapi_validate import Factories, SchemaValidator
from disagg_tools.emulator.apiserver.ratcheting import CorrelatedObject


def _error_path(base: str | None, name: str) -> str:
    if name and name != ".":
        return fe.child(base or "", name.removeprefix("."))
    return fe.NO_PATH if base is None else base


def _to_field_error(base: str | None, err: r.Error) -> fe.FieldError:
    """One kube-openapi error as ``kubeOpenAPIResultToFieldErrors`` words it."""
    if err.code is None:
        return fe.invalid(fe.NO_PATH if base is None else base, "", err.message)
    path = _error_path(base, err.name)
    value = "" if err.value is None else err.value
    if err.code == r.REQUIRED:
        return fe.required(path)
    if err.code == r.ENUM:
        shown = [v if isinstance(v, str) else gofmt.json_marshal(v) for v in err.values]
        return fe.not_supported(path, err.value, shown)
    if err.code == r.TOO_LONG:
        return fe.too_long(path, err.valid if isinstance(err.valid, int) else -1)
    if err.code in (r.MAX_ITEMS, r.TOO_MANY_PROPERTIES):
        actual = err.value if isinstance(err.value, int) else -1
        return fe.too_many(path, actual, err.valid if isinstance(err.valid, int) else -1)
    if err.code == r.INVALID_TYPE:
        return fe.type_invalid(path, value, err.message)
    return fe.invalid(path, value, err.message)


def to_field_errors(base: str | None, result: r.Result) -> list[fe.FieldError]:
    return [_to_field_error(base, e) for e in result.errors]


class Ratcheting:
    """``ratchetingValueValidator``: validates its correlation's new value; when that value
    equals the old one, its errors become warnings. Children that correlate ratchet too."""

    def __init__(self, correlation: CorrelatedObject, schema: Node, path: str) -> None:
        self.correlation, self.schema, self.path = correlation, schema, path

    def validate(self, data: Any) -> r.Result:
        factories = Factories(self._field, self._index)
        result = SchemaValidator(self.schema, self.path, factories).validate(self.correlation.value)
        if result.valid or not self.correlation.unchanged():
            return result
        ratcheted = r.Result()
        ratcheted.merge_as_warnings(result)
        return ratcheted

    def _field(self, name: Any, schema: Node, path: str) -> Any:
        child = self.correlation.key(name)
        if child is None or (self.path == "" and name in ("kind", "apiVersion")):
            return SchemaValidator(schema, path)
        return Ratcheting(child, schema, path)

    def _index(self, i: Any, schema: Node, path: str) -> Any:
        child = self.correlation.index(i)
        return SchemaValidator(schema, path) if child is None else Ratcheting(child, schema, path)


class SchemaCheck:
    """``NewSchemaValidator`` for one schema (compiled once), with create and update;
    ``converted=False``: ``NewSchemaValidatorFromOpenAPI(s.ToKubeOpenAPI())``, a default's."""

    def __init__(self, raw: dict[str, Any], *, converted: bool = True) -> None:
        self.raw = raw
        self.node = compile_schema(raw, converted=converted)

    def validate(self, value: Any, base: str | None = None) -> list[fe.FieldError]:
        """``ValidateCustomResource``: errors at paths under ``base`` (None: the root)."""
        return to_field_errors(base, SchemaValidator(self.node, "").validate(value))

    def validate_update(
        self,
        value: Any,
        old: Any,
        base: str | None = None,
        correlation: CorrelatedObject | None = None,
    ) -> list[fe.FieldError]:
        """``ValidateCustomResourceUpdate`` with ratcheting (``correlation``: the caller's,
        else one of ``value`` and ``old`` under this schema)."""
        correlation = correlation or CorrelatedObject(value, old, self.raw)
        return to_field_errors(base, Ratcheting(correlation, self.node, "").validate(value))

    def result_update(self, value: Any, old: Any) -> r.Result:
        """The raw kube-openapi result of a ratcheting update (errors and warnings)."""
        return Ratcheting(CorrelatedObject(value, old, self.raw), self.node, "").validate(value)
