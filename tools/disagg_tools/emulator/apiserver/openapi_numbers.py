"""kube-openapi's number checks: the range of a format, bounds, multipleOf.

Ports kube-openapi ``pkg/validation/validate`` at 43fb72c5454a (pinned by
apiextensions-apiserver v0.36.3): ``numberValidator`` (validator.go) and values.go; a JSON
integer is Go's int64, compared with a bound as an int64.
"""

from __future__ import annotations

import math
from typing import Any

from disagg_tools.emulator.apiserver import gofmt
from disagg_tools.emulator.apiserver.openapi import Node
from disagg_tools.emulator.apiserver.openapi_result import (
    MAX,
    MIN,
    MULTIPLE_OF,
    MULTIPLE_OF_MUST_BE_POSITIVE,
    Error,
    Result,
    is_json_integer,
)

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "": (-(2**63), 2**63 - 1)}
_INT_RANGES["int64"] = _INT_RANGES[""]
_FLOAT32_MAX = 3.4028234663852886e38


def _fixed(value: float) -> str:
    """``swag.FormatFloat64``: ``strconv.FormatFloat(f, 'f', -1, 64)``."""
    return gofmt.json_marshal(value) if 1e-6 <= abs(value) < 1e21 or value == 0 else repr(value)


# a value out of its format's range is a plain error (``Checked value must be of type integer
# with format int32 in spec.x``), which the apiserver reports at the path ``<nil>``
def _in_range(value: int | float, type_name: str, fmt: str, prefix: str, path: str) -> Error | None:
    """``IsValueValidAgainstRange``: whether the value parses back as the type and format."""
    text = str(value) if isinstance(value, int) else _fixed(value)
    ok = True
    if type_name == "integer":
        low, high = _INT_RANGES.get(fmt, _INT_RANGES[""])
        ok = text.lstrip("-").isdigit() and low <= int(text) <= high
    elif fmt in ("float", "float32"):
        ok = math.isfinite(float(value)) and abs(float(value)) <= _FLOAT32_MAX
    if ok:
        return None
    if fmt:
        return Error(f"{prefix} value must be of type {type_name} with format {fmt} in {path}")
    return Error(f"{prefix} value must be of type {type_name} (default format) in {path}")


def _bound_error(path: str, bound: Any, exclusive: bool, value: Any, upper: bool) -> Error:
    word = (
        ("less than" if exclusive else "less than or equal to")
        if upper
        else ("greater than" if exclusive else "greater than or equal to")
    )
    shown = gofmt.value_v(bound)
    return Error(f"{path} in body should be {word} {shown}", MAX if upper else MIN, path, value)


def _beyond(value: int | float, bound: float, exclusive: bool, upper: bool) -> bool:
    if upper:
        return value >= bound if exclusive else value > bound
    return value <= bound if exclusive else value < bound


def _bound(
    path: str, value: int | float, bound: float, exclusive: bool, upper: bool
) -> Error | None:
    """``MaximumNativeType`` / ``MinimumNativeType``: an int64 against ``int64(bound)``."""
    if isinstance(value, int):
        limit: int | float = math.trunc(bound) if math.isfinite(bound) else bound
        if _beyond(value, limit, exclusive, upper):
            return _bound_error(path, limit, exclusive, value, upper)
        return None
    if _beyond(value, bound, exclusive, upper):
        return _bound_error(path, float(bound), exclusive, float(value), upper)
    return None


def _multiple_of(path: str, value: int | float, factor: float, native: bool) -> Error | None:
    """``MultipleOfNativeType`` (native) or ``MultipleOf`` (on float64)."""
    if native and isinstance(value, int):
        whole = math.trunc(factor)
        if whole <= 0:
            return Error(
                f"factor MultipleOf declared for {path} must be positive: {whole}",
                MULTIPLE_OF_MUST_BE_POSITIVE,
                path,
                whole,
            )
        if value % whole:
            return Error(
                f"{path} in body should be a multiple of {whole}", MULTIPLE_OF, path, value
            )
        return None
    data = float(value)
    if factor <= 0:
        return Error(
            f"factor MultipleOf declared for {path} must be positive: {gofmt.float_v(factor)}",
            MULTIPLE_OF_MUST_BE_POSITIVE,
            path,
            factor,
        )
    ratio = 1 / factor * data if factor < 1 else data / factor
    if not is_json_integer(ratio):
        message = f"{path} in body should be a multiple of {gofmt.float_v(factor)}"
        return Error(message, MULTIPLE_OF, path, data)
    return None


def check(schema: Node, path: str, value: int | float) -> Result:
    """``numberValidator.Validate``: range, then multipleOf, minimum, maximum."""
    type_name, fmt = "", ""
    if len(schema.types) == 1 and schema.types[0] in ("integer", "number"):
        type_name = schema.types[0]
        allowed = ("int32", "int64") if type_name == "integer" else ("float", "double")
        fmt = schema.format if schema.format in allowed else ""
    result = Result()
    result.add(_in_range(value, type_name, fmt, "Checked", path))
    parts = [Result(), Result(), Result()]  # multipleOf, minimum, maximum: merged in order
    if schema.multiple_of is not None:
        problem = _in_range(schema.multiple_of, type_name, fmt, "MultipleOf", path)
        parts[0].add(problem, _multiple_of(path, value, schema.multiple_of, problem is None))
    bounds = (
        (1, schema.minimum, "Minimum boundary", schema.exclusive_minimum, False),
        (2, schema.maximum, "Maximum boundary", schema.exclusive_maximum, True),
    )
    for slot, bound, prefix, exclusive, upper in bounds:
        if bound is not None:
            problem = _in_range(bound, type_name, fmt, prefix, path)
            native = value if problem is None else float(value)  # Maximum() on float64 else
            parts[slot].add(problem, _bound(path, native, bound, exclusive, upper))
    result.merge(*parts)
    result.match_count += 1
    return result
