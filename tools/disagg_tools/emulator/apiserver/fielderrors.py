"""Field errors and failure Status bodies, worded byte for byte as kube-apiserver words them.

Ports apimachinery v0.36.3 ``pkg/util/validation/field`` (``Error``, ``ErrorBody``, the
constructors; paths as ``Path.String`` gives them, ``<nil>`` for none), ``pkg/util/errors``
(the aggregate) and ``pkg/api/errors`` (``NewInvalid``, ``NewBadRequest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from disagg_tools.emulator.apiserver import gofmt

# field.ErrorType: the StatusCause reason, and the phrase ErrorBody starts with
TYPES = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "FieldValueTooFew": "Too few",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
    "FieldValueTooShort": "Too short",
}
_NO_VALUE = {
    "FieldValueRequired",
    "FieldValueForbidden",
    "FieldValueTooLong",
    "FieldValueTooShort",
    "InternalError",
}
NO_PATH = "<nil>"  # field.Path(nil).String()


class Omit:
    """``field.OmitValueType``: the value is left out of the message."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = Omit()


@dataclass(frozen=True)
class FieldError:
    """``field.Error``: a type (``FieldValueInvalid``...), a path, the bad value, a detail."""

    type: str
    field: str
    bad_value: Any = ""
    detail: str = ""

    def body(self) -> str:
        """``ErrorBody``: what a StatusCause's message says."""
        phrase = TYPES[self.type]
        if self.type in _NO_VALUE or self.bad_value is OMIT:
            text = phrase
        elif isinstance(self.bad_value, str):
            text = f"{phrase}: {gofmt.quote(self.bad_value)}"
        elif isinstance(self.bad_value, (bool, int, float)):
            text = f"{phrase}: {gofmt.value_v(self.bad_value)}"
        else:
            text = f"{phrase}: {_marshal(self.bad_value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def _marshal(value: Any) -> str:
    """``json.Marshal`` of a bad value; where it fails (NaN), Go prints the value itself."""
    try:
        return gofmt.json_marshal(value)
    except (TypeError, ValueError):
        return gofmt.value_v(value)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", path, value, detail)


def type_invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueTypeInvalid", path, value, detail)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, "", detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, "", detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("FieldValueDuplicate", path, value)


def internal(path: str, detail: str) -> FieldError:
    return FieldError("InternalError", path, detail, detail)


def not_supported(path: str, value: Any, valid: list[str]) -> FieldError:
    detail = "supported values: " + ", ".join(gofmt.quote(v) for v in valid) if valid else ""
    return FieldError("FieldValueNotSupported", path, value, detail)


def too_long(path: str, max_length: int) -> FieldError:
    unit = "byte" if max_length == 1 else "bytes"
    detail = f"may not be more than {max_length} {unit}" if max_length >= 0 else ""
    return FieldError("FieldValueTooLong", path, "<value omitted>", detail or "value is too long")


def too_many(path: str, actual: int, most: int) -> FieldError:
    unit = "item" if most == 1 else "items"
    detail = f"must have at most {most} {unit}" if most >= 0 else "has too many items"
    return FieldError("FieldValueTooMany", path, actual if actual >= 0 else OMIT, detail)


def child(path: str, *names: str) -> str:
    """``Path.Child(names...)``: ``a.b`` (the root path is "")."""
    for name in names:
        path = f"{path}.{name}" if path else name
    return path


def index(path: str, i: int) -> str:
    """``Path.Index``: ``a[0]``."""
    return f"{path}[{i}]"


def key(path: str, name: str) -> str:
    """``Path.Key``: ``a[name]``."""
    return f"{path}[{name}]"


def aggregate(errors: list[FieldError]) -> str:
    """``ErrorList.ToAggregate().Error()``: one message as it is, several as ``[a, b]``,
    each message once."""
    messages = list(dict.fromkeys(str(e) for e in errors))
    return messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"


def status(code: int, reason: str, message: str, details: dict[str, Any] | None) -> dict[str, Any]:
    """A ``metav1.Status`` failure body as the apiserver serializes it (empty fields left out)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:  # StatusReasonUnknown is "" and left out
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def new_invalid(group: str, kind: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """``errors.NewInvalid``: 422 ``<Kind>.<group> "<name>" is invalid: <errors>``."""
    qualified = f"{kind}.{group}" if group else kind
    message = f"{qualified} {gofmt.quote(name)} is invalid"
    if errors:
        message += ": " + aggregate(errors)
    causes = [
        {k: v for k, v in (("reason", e.type), ("message", e.body()), ("field", e.field)) if v}
        for e in errors
    ]
    details: dict[str, Any] = {
        k: v for k, v in (("name", name), ("group", group), ("kind", kind)) if v
    }
    if causes:
        details["causes"] = causes
    return status(422, "Invalid", message, details)


def bad_request(message: str) -> dict[str, Any]:
    """``errors.NewBadRequest``: 400 with the message and no details."""
    return status(400, "BadRequest", message, None)


class ApiError(Exception):
    """A request the apiserver answers with a failure Status: ``body`` and its HTTP code."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["message"])
        self.body = body
        self.code = int(body["code"])
