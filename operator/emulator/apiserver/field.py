"""Field errors as kube-apiserver words them, and the 422 message a client reads.

Pure layer. Ports apimachinery v0.36.3 ``pkg/util/validation/field`` (paths, ``Error`` and
``ErrorBody``), ``pkg/util/errors`` (the aggregate) and ``pkg/api/errors.NewInvalid``, so
that a refusal of the emulator reads byte for byte like the apiserver's: a bad value is
printed with Go's ``%v`` / ``%q`` for scalars and Go's ``json.Marshal`` for the rest.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum
from typing import Any


class ErrorType(str, Enum):
    """``field.ErrorType``: the value is the ``StatusCause`` type, ``str()`` the phrase."""

    NOT_FOUND = "FieldValueNotFound"
    REQUIRED = "FieldValueRequired"
    DUPLICATE = "FieldValueDuplicate"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    FORBIDDEN = "FieldValueForbidden"
    TOO_LONG = "FieldValueTooLong"
    TOO_MANY = "FieldValueTooMany"
    INTERNAL = "InternalError"
    TYPE_INVALID = "FieldValueTypeInvalid"

    def __str__(self) -> str:
        return _PHRASES[self]


_PHRASES = {
    ErrorType.NOT_FOUND: "Not found",
    ErrorType.REQUIRED: "Required value",
    ErrorType.DUPLICATE: "Duplicate value",
    ErrorType.INVALID: "Invalid value",
    ErrorType.NOT_SUPPORTED: "Unsupported value",
    ErrorType.FORBIDDEN: "Forbidden",
    ErrorType.TOO_LONG: "Too long",
    ErrorType.TOO_MANY: "Too many",
    ErrorType.INTERNAL: "Internal error",
    ErrorType.TYPE_INVALID: "Invalid value",
}
_NO_VALUE = {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.TOO_LONG, ErrorType.INTERNAL}


@dataclass(frozen=True)
class GoJSON:
    """A bad value that Go would print as this JSON text (a Go struct, rendered by caller)."""

    text: str


class _Omit:
    """``field.OmitValueType``: the error prints no value."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: ``str()`` is its ``Error()`` (``<path>: <type>[: value][: detail]``)."""

    path: str
    type: ErrorType
    value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """``ErrorBody()``: what a ``StatusCause`` message carries."""
        text = str(self.type)
        if self.type not in _NO_VALUE and self.value is not OMIT:
            text += ": " + go_value(self.value)
        return text + (": " + self.detail if self.detail else "")

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}"


# --- paths: field.Path.Child / Key / Index, kept as their String() form -----------------


def child(path: str, *names: str) -> str:
    """``path.Child(names...)``."""
    for name in names:
        path = f"{path}.{name}" if path else name
    return path


def key(path: str, name: str) -> str:
    """``path.Key(name)``."""
    return f"{path}[{name}]"


def index(path: str, i: int) -> str:
    """``path.Index(i)``."""
    return f"{path}[{i}]"


# --- constructors as apimachinery names them ---------------------------------------------


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, ErrorType.REQUIRED, "", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, ErrorType.FORBIDDEN, "", detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INVALID, value, detail)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, ErrorType.TYPE_INVALID, value, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, ErrorType.DUPLICATE, value)


def internal(path: str, detail: str) -> FieldError:
    return FieldError(path, ErrorType.INTERNAL, "", detail)


def not_supported(path: str, value: Any, valid: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in valid) if valid else ""
    return FieldError(path, ErrorType.NOT_SUPPORTED, value, detail)


def too_long(path: str, max_length: int) -> FieldError:
    unit = "byte" if max_length == 1 else "bytes"
    detail = f"may not be more than {max_length} {unit}" if max_length >= 0 else ""
    return FieldError(path, ErrorType.TOO_LONG, "<value omitted>", detail or "value is too long")


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    unit = "item" if maximum == 1 else "items"
    detail = f"must have at most {maximum} {unit}" if maximum >= 0 else "has too many items"
    return FieldError(path, ErrorType.TOO_MANY, actual, detail)


# --- Go's printing of values ---------------------------------------------------------------


def go_value(value: Any) -> str:
    """A bad value as ``ErrorBody`` prints it: ``%v`` for numbers and bools, ``%q`` for a
    string, ``json.Marshal`` for anything else."""
    if isinstance(value, GoJSON):
        return value.text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value, "v")
    if isinstance(value, str):
        return go_quote(value)
    return go_json(value)


def go_quote(text: str) -> str:
    """``strconv.Quote``: printable runes kept, the rest escaped as Go does."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x80:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    return "".join(out) + '"'


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def go_float(value: float, verb: str) -> str:
    """A float64 as Go prints it: ``%v`` (``strconv`` ``'g'``, shortest) or ``"json"``
    (``encoding/json``: fixed unless below 1e-6 or from 1e21 on)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value))
    if verb == "json":
        scientific = abs(value) < 1e-6 or abs(value) >= 1e21
    else:
        scientific = point - 1 < -4 or point - 1 >= 6
    if not scientific:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits))
        return f"{sign}{digits[:point]}.{digits[point:]}"
    exponent = point - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exp_text = str(abs(exponent))
    if verb != "json" or exponent >= 0:
        exp_text = exp_text.zfill(2)
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{exp_text}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest round-trip decimal digits of ``value`` and where its point goes."""
    _, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    trimmed = len("".join(map(str, digit_tuple))) - len(digits)
    assert isinstance(exponent, int)
    return digits, len(digits) + exponent + trimmed


def go_json(value: Any) -> str:
    """``json.Marshal`` of a JSON value: sorted keys, no spaces, Go's float form, and the
    characters Go escapes (``<``, ``>``, ``&``, U+2028, U+2029)."""
    text = _dump(value)
    for raw, escaped in _JSON_ESCAPES:
        text = text.replace(raw, escaped)
    return text


_JSON_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def _dump(value: Any) -> str:
    if isinstance(value, float):
        return go_float(value, "json")
    if isinstance(value, dict):
        items = (json.dumps(k, ensure_ascii=False) + ":" + _dump(value[k]) for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_dump(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, str)):
        return json.dumps(value, ensure_ascii=False)
    raise TypeError(f"not a JSON value: {value!r}")


# --- aggregates and the Status a client sees ----------------------------------------------


def aggregate(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: duplicates dropped, one bare, several in ``[...]``."""
    seen: list[str] = []
    for error in errors:
        text = str(error)
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def invalid_status_message(kind: str, name: str, errors: list[FieldError]) -> str:
    """``errors.NewInvalid(kind, name, errs).Error()``; ``kind`` is ``Kind.group``."""
    if not errors:
        return f"{kind} {go_quote(name)} is invalid"
    return f"{kind} {go_quote(name)} is invalid: {aggregate(errors)}"
