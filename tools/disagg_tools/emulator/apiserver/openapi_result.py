"""kube-openapi's validation results and errors (the part every validator step shares).

Ports kube-openapi ``pkg/validation/validate/result.go`` and ``errors/schema.go`` at
43fb72c5454a (pinned by apiextensions-apiserver v0.36.3): each message once, and the match
count that picks the anyOf branch whose errors are reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.emulator.apiserver import gofmt

# errors.Validation codes (errors/schema.go: 600 + iota from 601); None marks a plain error
# (errors.New, fmt.Errorf), which apiextensions reports as "<path>: Invalid value: \"\": ..."
INVALID_TYPE, REQUIRED, TOO_LONG, TOO_SHORT, PATTERN, ENUM = range(601, 607)
MULTIPLE_OF, MAX, MIN, UNIQUE, MAX_ITEMS, MIN_ITEMS = range(607, 613)
TOO_FEW_PROPERTIES, TOO_MANY_PROPERTIES, UNALLOWED_PROPERTY = 614, 615, 616
MULTIPLE_OF_MUST_BE_POSITIVE = 618


@dataclass(frozen=True)
class Error:
    """A kube-openapi error: an ``errors.Validation`` (``code`` set) or a plain one."""

    message: str
    code: int | None = None
    name: str = ""
    value: Any = None
    valid: Any = None
    values: tuple[Any, ...] = ()


@dataclass
class Result:
    """``validate.Result``: errors and warnings, each message once, and a match count."""

    errors: list[Error] = field(default_factory=list)
    warnings: list[Error] = field(default_factory=list)
    match_count: int = 0

    def add(self, *errors: Error | None) -> None:
        seen = {e.message for e in self.errors}
        for e in errors:
            if e is not None and e.message not in seen:
                self.errors.append(e)
                seen.add(e.message)

    def merge(self, *others: Result | None) -> Result:
        for other in others:
            if other is not None:
                self.add(*other.errors)
                self._warn(other.warnings)
                self.match_count += other.match_count
        return self

    def merge_as_warnings(self, other: Result) -> None:
        self._warn(other.errors + other.warnings)
        self.match_count += other.match_count

    def _warn(self, warnings: list[Error]) -> None:
        seen = {e.message for e in self.warnings}
        for e in warnings:
            if e.message not in seen:
                self.warnings.append(e)
                seen.add(e.message)

    @property
    def valid(self) -> bool:
        return not self.errors


def errs(*errors: Error | None) -> Result:
    """``errorHelp.sErr``: a result holding errors and no match."""
    result = Result()
    result.add(*errors)
    return result


def type_error(name: str, type_name: str, value: Any) -> Error:
    """``errors.InvalidType``: the value is quoted when it is a string."""
    shown = f": {gofmt.quote(value)}" if isinstance(value, str) else ""
    return Error(f"{name} in body must be of type {type_name}{shown}", INVALID_TYPE, name, value)


def is_json_integer(f: float) -> bool:
    """swag ``IsFloat64AJSONInteger`` (v0.23.0): an integer within ±(2^53-1), give or take
    a relative 1e-9 for positive values."""
    if not math.isfinite(f) or abs(f) > 2**53 - 1:
        return False
    if f == math.trunc(f):
        return True
    truncated = float(math.trunc(f))
    if f < 0 or truncated == 0:  # Go's uint64(negative) is huge; near 0 nothing is close
        return False
    return abs(f - truncated) / (abs(f) + truncated) < 1e-9


def json_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` of decoded JSON: an int is not a float, nor a bool an int."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
