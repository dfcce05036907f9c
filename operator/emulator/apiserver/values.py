"""A JSON value against a CRD schema, as kube-apiserver's OpenAPI validator judges it.

Pure layer. Ports what kube-openapi's ``pkg/validation/validate`` checks (types with
int-or-string and nullable, enum, bounds, lengths, patterns, items, required,
properties, additionalProperties, min/maxProperties, allOf/anyOf/oneOf/not, common
formats) and how apiextensions-apiserver v0.36.3 ``pkg/apiserver/validation/validation.go``
(``kubeOpenAPIResultToFieldErrors``) turns its results into field errors. Names are
kube-openapi's (``foo.bar`` below the checked value, which itself has none: ``in body``).
Used for a schema's defaults; formats beyond those in ``_FORMATS`` are not checked.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple

import re2

from disagg_operator.emulator.apiserver import field as f
from disagg_operator.emulator.apiserver import goregex
from disagg_operator.emulator.apiserver.field import FieldError, go_float, go_json

Schema = Mapping[str, Any]


class Problem(NamedTuple):
    """One kube-openapi ``errors.Validation``: its code, name, value and message."""

    code: str
    name: str
    message: str
    value: Any = None
    valid: Any = None


def validate_value(path: str, value: Any, schema: Schema) -> list[FieldError]:
    """``ValidateCustomResource(path, value, validator(schema))``."""
    return [_to_field_error(path, problem) for problem in _validate(value, schema, "")]


def _to_field_error(path: str, p: Problem) -> FieldError:
    at = f.child(path, p.name.removeprefix(".")) if p.name and p.name != "." else path
    shown = "" if p.value is None else p.value
    if p.code == "required":
        return f.required(at, "")
    if p.code == "enum":
        return f.not_supported(
            at, p.value, [v if isinstance(v, str) else go_json(v) for v in p.valid]
        )
    if p.code == "too_long":
        return f.too_long(at, int(p.valid))
    if p.code in ("max_items", "max_properties"):
        return f.too_many(at, int(p.value), int(p.valid))
    if p.code == "type":
        return f.type_invalid(at, shown, p.message)
    if p.code == "composite":  # not an errors.Validation: reported at the value's root
        return f.invalid(path, "", p.message)
    return f.invalid(at, shown, p.message)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((int, "integer"), (float, "number"), (str, "string"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "object"


def _types(schema: Schema) -> list[str]:
    if schema.get("x-kubernetes-int-or-string"):
        return ["integer", "string"]
    return [schema["type"]] if schema.get("type") else []


def _in_body(name: str, text: str) -> str:
    return f"{name} in body {text}"


def _validate(value: Any, schema: Schema, name: str) -> list[Problem]:
    types = _types(schema)
    if value is None:
        if types and not schema.get("nullable"):
            message = _in_body(name, f'must be of type {",".join(types)}: "null"')
            return [Problem("type", name, message, "null")]
        return _enum(value, schema, name)
    kind = _kind(value)
    fits = kind in types or (kind == "number" and "integer" in types and float(value).is_integer())
    if types and not (fits or (kind == "integer" and "number" in types)):
        # kube-openapi reports the value's type name as the bad value
        message = _in_body(name, f'must be of type {",".join(types)}: "{kind}"')
        return [Problem("type", name, message, kind)]
    problems = _junctors(value, schema, name)
    if isinstance(value, str):
        problems += _string(value, schema, name)
    elif kind in ("integer", "number"):
        problems += _number(value, schema, name)
    elif isinstance(value, list):
        problems += _array(value, schema, name)
    problems += _enum(value, schema, name)
    if isinstance(value, Mapping):
        problems += _object(value, schema, name)
    return problems


def _enum(value: Any, schema: Schema, name: str) -> list[Problem]:
    allowed = schema.get("enum")
    if not allowed or any(_equal(value, a) for a in allowed):
        return []
    shown = "[" + " ".join(str(a) for a in allowed) + "]"
    return [
        Problem("enum", name, _in_body(name, f"should be one of {shown}"), value, list(allowed))
    ]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _string(value: str, schema: Schema, name: str) -> list[Problem]:
    out: list[Problem] = []
    high, low = schema.get("maxLength"), schema.get("minLength")
    if high is not None and len(value) > high:
        out.append(
            Problem(
                "too_long",
                name,
                _in_body(name, f"should be at most {high} chars long"),
                value,
                high,
            )
        )
    if low is not None and len(value) < low:
        message = _in_body(name, f"should be at least {low} chars long")
        out.append(Problem("too_short", name, message, value, low))
    pattern = schema.get("pattern")
    if pattern and goregex.compile_error(pattern) is None and re2.search(pattern, value) is None:
        out.append(Problem("pattern", name, _in_body(name, f"should match '{pattern}'"), value))
    fmt = schema.get("format") or ""
    if fmt in _FORMATS and not _FORMATS[fmt](value):
        message = _in_body(name, f"must be of type {fmt}: {f.go_quote(value)}")
        out.append(Problem("format", name, message, value))
    return out


def _number(value: float, schema: Schema, name: str) -> list[Problem]:
    out: list[Problem] = []
    multiple = schema.get("multipleOf")
    if multiple and (value / multiple) != int(value / multiple):
        message = _in_body(name, f"should be a multiple of {_num(multiple)}")
        out.append(Problem("multiple_of", name, message, value))
    for key, sign, word in (("maximum", 1, "less than"), ("minimum", -1, "greater than")):
        bound = schema.get(key)
        if bound is None:
            continue
        exclusive = bool(schema.get("exclusiveM" + key[1:]))
        if sign * (value - bound) > 0 or (exclusive and value == bound):
            phrase = word if exclusive else f"{word} or equal to"
            out.append(
                Problem(key, name, _in_body(name, f"should be {phrase} {_num(bound)}"), value)
            )
    return out


def _num(value: float) -> str:
    return go_float(float(value), "v")


def _array(value: list[Any], schema: Schema, name: str) -> list[Problem]:
    out: list[Problem] = []
    low, high = schema.get("minItems"), schema.get("maxItems")
    if low is not None and len(value) < low:
        message = _in_body(name, f"should have at least {low} items")
        out.append(Problem("min_items", name, message, len(value), low))
    if high is not None and len(value) > high:
        message = _in_body(name, f"should have at most {high} items")
        out.append(Problem("max_items", name, message, len(value), high))
    if schema.get("uniqueItems") and any(
        _equal(a, b) for i, a in enumerate(value) for b in value[i + 1 :]
    ):
        out.append(Problem("unique", name, _in_body(name, "shouldn't contain duplicates")))
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, item in enumerate(value):
            out += _validate(item, items, f"{name}.{i}")
    return out


def _object(value: Mapping[str, Any], schema: Schema, name: str) -> list[Problem]:
    out: list[Problem] = []
    high, low = schema.get("maxProperties"), schema.get("minProperties")
    if high is not None and len(value) > high:
        message = _in_body(name, f"should have at most {high} properties")
        out.append(Problem("max_properties", name, message, len(value), high))
    if low is not None and len(value) < low:
        message = _in_body(name, f"should have at least {low} properties")
        out.append(Problem("min_properties", name, message, len(value), low))
    return out + _properties(value, schema, name)


def _properties(value: Mapping[str, Any], schema: Schema, name: str) -> list[Problem]:
    out: list[Problem] = []
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for key in sorted(k for k in value if k not in properties):
        if additional is False:
            message = f"{name}.{key} in body is a forbidden property"
            out.append(Problem("unallowed", name, message, key))
        elif isinstance(additional, Mapping):
            out += _validate(value[key], additional, f"{name}.{key}")
    for key in sorted(k for k in properties if k in value):
        out += _validate(value[key], properties[key], f"{name}.{key}" if name else key)
    for key in schema.get("required") or []:
        if key not in value:
            out.append(Problem("required", f"{name}.{key}", f"{name}.{key} in body is required"))
    return out


def _fewest(results: list[list[Problem]]) -> list[Problem]:
    """The failures of the alternative that came closest (kube-openapi keeps those)."""
    return min(results, key=lambda problems: len(problems))


def _composite(name: str, message: str) -> Problem:
    return Problem("composite", name, f'"{name}" {message}')


def _junctors(value: Any, schema: Schema, name: str) -> list[Problem]:
    """anyOf, oneOf, allOf and not, with the failures kube-openapi keeps of each."""
    out: list[Problem] = []
    any_of = [_validate(value, s, name) for s in schema.get("anyOf") or []]
    if any_of and all(any_of):
        out += [
            _composite(name, "must validate at least one schema (anyOf)"),
            *min(any_of, key=len),
        ]
    one_of = [_validate(value, s, name) for s in schema.get("oneOf") or []]
    valid = sum(1 for r in one_of if not r)
    if one_of and valid != 1:
        extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
        out.append(_composite(name, f"must validate one and only one schema (oneOf). {extra}"))
        out += _fewest(one_of) if valid == 0 else []
    all_of = [_validate(value, s, name) for s in schema.get("allOf") or []]
    out += [p for result in all_of for p in result]
    passed = sum(1 for r in all_of if not r)
    if all_of and passed != len(all_of):
        extra = ". None validated" if passed == 0 else ""
        out.append(_composite(name, f"must validate all the schemas (allOf){extra}"))
    if schema.get("not") is not None and not _validate(value, schema["not"], name):
        out.append(_composite(name, "must not validate the schema (not)"))
    return out


def _is_datetime(text: str) -> bool:
    shape = r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?"
    if not re.fullmatch(shape, text):
        return False
    try:
        datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text).replace("z", "Z"))
    except ValueError:
        return False
    return True


def _parses(parse: Callable[[str], object]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _is_date(text: str) -> bool:
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text)) and _parses(
        lambda t: datetime.strptime(t, "%Y-%m-%d")
    )(text)


_FORMATS: dict[str, Callable[[str], bool]] = {
    "date": _is_date,
    "date-time": _is_datetime,
    "datetime": _is_datetime,
    "uuid": _parses(uuid.UUID),
    "ipv4": _parses(ipaddress.IPv4Address),
    "ipv6": _parses(ipaddress.IPv6Address),
    "cidr": _parses(ipaddress.ip_network),
    "byte": _parses(lambda t: base64.b64decode(t, validate=True)),
}
