"""kube-openapi's schema validator, the one kube-apiserver runs on every custom resource.

Ports kube-openapi ``pkg/validation/validate`` at 43fb72c5454a (pinned by
apiextensions-apiserver v0.36.3): ``schema.go``, ``type.go``, ``validator.go``,
``object_validator.go``, ``slice_validator.go`` and ``schema_props.go``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from disagg_tools.emulator.apiserver import formats, gofmt, openapi_numbers
from disagg_tools.emulator.apiserver.goregex import compile_go
from disagg_tools.emulator.apiserver.openapi import Node
from disagg_tools.emulator.apiserver.openapi_result import (
    ENUM,
    MAX_ITEMS,
    MIN_ITEMS,
    PATTERN,
    REQUIRED,
    TOO_FEW_PROPERTIES,
    TOO_LONG,
    TOO_MANY_PROPERTIES,
    TOO_SHORT,
    UNALLOWED_PROPERTY,
    UNIQUE,
    Error,
    Result,
    errs,
    is_json_integer,
    json_equal,
    type_error,
)


class Validator(Protocol):
    def validate(self, data: Any) -> Result: ...


# (key or index, schema, path) -> the child's validator
Make = Callable[[Any, Node, str], Validator]


@dataclass(frozen=True)
class Factories:
    """``SchemaValidatorOptions``: how a node makes the validators of its children."""

    field: Make
    index: Make


def plain(name: Any, schema: Node, path: str) -> Validator:
    return SchemaValidator(schema, path)


PLAIN = Factories(plain, plain)


def _kind(data: Any) -> str:
    if isinstance(data, bool):
        return "boolean"
    if isinstance(data, int):
        return "integer"
    if isinstance(data, float):
        return "number"
    if isinstance(data, str):
        return "string"
    return "array" if isinstance(data, list) else "object"


class SchemaValidator:
    """``validate.SchemaValidator`` of one node at ``path`` ("" for the root)."""

    def __init__(self, schema: Node, path: str, factories: Factories = PLAIN) -> None:
        self.schema, self.path, self.factories = schema, path, factories

    def validate(self, data: Any) -> Result:
        result = Result()
        if data is None:
            result.merge(self._type(None), self._enum(None))
            return result
        kind = _kind(data)
        steps: list[Callable[[Any], Result | None]] = []
        if self.schema.types or self.schema.format:
            steps.append(self._type)
        steps.append(self._props)
        if kind == "string":
            steps.append(self._string)
            if formats.normalize(self.schema.format) in formats.CHECKS:
                steps.append(self._format)
        if kind in ("integer", "number"):
            steps.append(self._number)
        if kind == "array":
            steps.append(self._slice)
        steps.append(self._enum)
        if kind == "object":
            steps.append(self._object)
        for step in steps:
            result.merge(step(data))
            result.match_count += 1
        result.match_count += 1
        return result

    # ------------------------------------------------------------------ type.go
    def _type(self, data: Any) -> Result:
        s, path = self.schema, self.path
        if data is None:
            if s.types and "null" not in s.types and not s.nullable:
                return errs(type_error(path, ",".join(s.types), "null"))
            return Result(match_count=1)
        kind = _kind(data)
        own_format = {"integer": "int64", "number": "float64"}.get(kind, "")
        float_int = kind == "number" and is_json_integer(data) and "integer" in s.types
        int_float = kind == "integer" and "number" in s.types
        fits = kind in s.types or float_int or int_float
        if kind not in ("string", "array") and s.format and not (fits or own_format == s.format):
            return errs(type_error(path, s.format, own_format))
        numeric = "number" in s.types or "integer" in s.types
        if not numeric and s.format and kind in ("string", "array"):
            return Result(match_count=1)
        if not fits:
            return errs(type_error(path, ",".join(s.types), kind))
        return Result(match_count=1)

    # ------------------------------------------------------------------ validator.go
    def _enum(self, data: Any) -> Result | None:
        values = self.schema.enum
        if not values or any(_enum_matches(data, v) for v in values):
            return None
        message = f"{self.path} in body should be one of {gofmt.value_v(values)}"
        return errs(Error(message, ENUM, self.path, data, values=tuple(values)))

    def _string(self, data: str) -> Result | None:
        s, path = self.schema, self.path
        if s.max_length is not None and len(data) > s.max_length:
            message = f"{path} in body should be at most {s.max_length} chars long"
            return errs(Error(message, TOO_LONG, path, data, s.max_length))
        if s.min_length is not None and len(data) < s.min_length:
            message = f"{path} in body should be at least {s.min_length} chars long"
            return errs(Error(message, TOO_SHORT, path, data, s.min_length))
        if s.pattern:
            compiled, problem = compile_go(s.pattern)
            shown = f"{s.pattern}, but pattern is invalid: {problem}" if problem else s.pattern
            if compiled is None or compiled.search(data) is None:
                return errs(Error(f"{path} in body should match '{shown}'", PATTERN, path, data))
        return None

    def _format(self, data: str) -> Result | None:
        if formats.CHECKS[formats.normalize(self.schema.format)](data):
            return None
        return errs(type_error(self.path, self.schema.format, data))

    def _number(self, data: int | float) -> Result:
        return openapi_numbers.check(self.schema, self.path, data)

    # ------------------------------------------------------------------ slice_validator.go
    def _slice(self, data: list[Any]) -> Result:
        s, path, result = self.schema, self.path, Result()
        if s.items is not None:
            for i, item in enumerate(data):
                child = self.factories.index(i, s.items, f"{path}[{i}]")
                result.merge(child.validate(item))
        size = len(data)
        if s.min_items is not None and size < s.min_items:
            message = f"{path} in body should have at least {s.min_items} items"
            result.add(Error(message, MIN_ITEMS, path, size, s.min_items))
        if s.max_items is not None and size > s.max_items:
            message = f"{path} in body should have at most {s.max_items} items"
            result.add(Error(message, MAX_ITEMS, path, size, s.max_items))
        if s.unique_items and _has_duplicates(data):
            result.add(Error(f"{path} in body shouldn't contain duplicates", UNIQUE, path))
        result.match_count += 1
        return result

    # ------------------------------------------------------------------ object_validator.go
    def _object(self, data: dict[str, Any]) -> Result:
        s, path, result = self.schema, self.path, Result()
        size = len(data)
        if s.min_properties is not None and size < s.min_properties:
            message = f"{path} in body should have at least {s.min_properties} properties"
            result.add(Error(message, TOO_FEW_PROPERTIES, path, size, s.min_properties))
        if s.max_properties is not None and size > s.max_properties:
            message = f"{path} in body should have at most {s.max_properties} properties"
            result.add(Error(message, TOO_MANY_PROPERTIES, path, size, s.max_properties))
        if s.additional is not None and not s.additional[0]:
            for k in data:
                if k not in s.properties:
                    message = f"{path}.{k} in body is a forbidden property"
                    result.add(Error(message, UNALLOWED_PROPERTY, path, k))
        elif s.additional is not None and s.additional[1] is not None:
            for k, v in data.items():
                if k not in s.properties:
                    child = self.factories.field(k, s.additional[1], f"{path}.{k}")
                    result.merge(child.validate(v))
        # upstream walks properties in Go's random map order; this port in schema order
        for name, prop in s.properties.items():
            if name in data:
                child = self.factories.field(name, prop, f"{path}.{name}" if path else name)
                result.merge(child.validate(data[name]))
        for name in s.required:
            if name not in data:
                result.add(Error(f"{path}.{name} in body is required", REQUIRED, f"{path}.{name}"))
        return result

    # ------------------------------------------------------------------ schema_props.go
    def _props(self, data: Any) -> Result:
        """allOf, anyOf, oneOf, not: branches are plain validators at this path."""
        s, path, main = self.schema, self.path, Result()
        if s.any_of:
            main.merge(self._any_of(data))
        if s.one_of:
            main.merge(self._one_of(data))
        if s.all_of:
            results = [SchemaValidator(b, path).validate(data) for b in s.all_of]
            main.merge(*results)
            passed = sum(r.valid for r in results)
            if passed != len(results):
                none = ". None validated" if passed == 0 else ""
                main.add(Error(f"{gofmt.quote(path)} must validate all the schemas (allOf){none}"))
        if s.not_ is not None and SchemaValidator(s.not_, path).validate(data).valid:
            main.add(Error(f"{gofmt.quote(path)} must not validate the schema (not)"))
        main.match_count += 1
        return main

    def _any_of(self, data: Any) -> Result:
        best: Result | None = None
        for branch in self.schema.any_of:
            result = SchemaValidator(branch, self.path).validate(data)
            if result.valid:
                return result
            if best is None or result.match_count > best.match_count:
                best = result
        failed = Result()
        failed.add(Error(f"{gofmt.quote(self.path)} must validate at least one schema (anyOf)"))
        return failed.merge(best)

    def _one_of(self, data: Any) -> Result:
        best: Result | None = None
        first: Result | None = None
        passed = 0
        for branch in self.schema.one_of:
            result = SchemaValidator(branch, self.path).validate(data)
            if result.valid:
                passed, best = passed + 1, None
                first = first or result
            elif passed == 0 and (best is None or result.match_count > best.match_count):
                best = result
        if passed == 1:
            return first or Result()
        why = "Found none valid" if passed == 0 else f"Found {passed} valid alternatives"
        failed = Result()
        failed.add(
            Error(f"{gofmt.quote(self.path)} must validate one and only one schema (oneOf). {why}")
        )
        return failed.merge(best)


def _go_convert(data: Any, target: Any) -> tuple[bool, Any]:
    """``reflect.Value.Convert`` between JSON kinds, as enum matching uses it: numbers
    convert both ways (a float truncates), an integer converts to a one-rune string."""
    if isinstance(target, bool) or isinstance(data, bool):
        return isinstance(target, bool) and isinstance(data, bool), data
    if isinstance(target, (int, float)) and isinstance(data, (int, float)):
        if isinstance(target, int):
            return True, int(data) if math.isfinite(data) else data
        return True, float(data)
    if isinstance(target, str) and isinstance(data, int):
        return True, chr(data) if 0 <= data <= 0x10FFFF else "\ufffd"
    if isinstance(target, str) or isinstance(data, str):
        return isinstance(target, str) and isinstance(data, str), data
    return type(target) is type(data), data


def _enum_matches(data: Any, value: Any) -> bool:
    if data is None or value is None:
        return False
    ok, converted = _go_convert(data, value)
    return ok and json_equal(converted, value)


def _has_duplicates(items: list[Any]) -> bool:
    return any(json_equal(items[i], items[j]) for i in range(len(items)) for j in range(i))
