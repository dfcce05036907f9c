"""The estimated cost of one CEL function call: cel-go's rules and Kubernetes' library.

Ports cel-go v0.26.0 ``checker/cost.go`` (``functionCost``) and apiserver v0.36.3
``pkg/cel/library/cost.go`` (``EstimateCallCost``, consulted first); costs and sizes are
(min, max) pairs saturating at 2^64 - 1, as cel-go's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from disagg_tools.emulator.apiserver.cel_parse import Expr
from disagg_tools.emulator.apiserver.cel_types import Type

MAX = 2**64 - 1
STRING_TRAVERSAL = 0.1
REGEX_LENGTH = 0.25
MAX_NAME_FORMAT_REGEX_SIZE = 128
MAX_FORMAT_SIZE = 64

Est = tuple[int, int]  # (min, max)
Entry = tuple[str, Est, Est]  # a literal container's kind, key size, value size
Call = tuple[Est, Est | None]  # a call's cost and, where known, its result's size
UNKNOWN: Est = (0, MAX)
ONE: Est = (1, 1)


def add(a: Est, b: Est) -> Est:
    return min(a[0] + b[0], MAX), min(a[1] + b[1], MAX)


def mul(a: Est, b: Est) -> Est:
    return min(a[0] * b[0], MAX), min(a[1] * b[1], MAX)


def factor(a: Est, f: float) -> Est:
    """``MultiplyByCostFactor``: each bound times ``f``, rounded up, saturating."""

    def one(x: int) -> int:
        if x and f > 0 and x > MAX / f:
            return MAX
        ceil = math.ceil(x * f)
        return MAX if ceil >= 2.0**64 else int(ceil)

    return one(a[0]), one(a[1])


def union(a: Est, b: Est) -> Est:
    return min(a[0], b[0]), max(a[1], b[1])


class Sizes(Protocol):
    """What an estimate reads of the expression being costed (the coster)."""

    def size(self, e: Expr) -> Est | None: ...

    def size_or_unknown(self, e: Expr) -> Est: ...

    def entry(self, e: Expr) -> Entry | None: ...

    def set_entry(self, e: Expr, entry: Entry) -> None: ...

    def type_of(self, e: Expr) -> Type: ...

    def items_size(self, e: Expr) -> Est | None: ...


def call_cost(c: Sizes, e: Expr, overload: str, arg_costs: list[Est]) -> Call:
    """``functionCost``: Kubernetes' estimator first, then cel-go's, the arguments added."""
    arg_sum: Est = (0, 0)
    for cost in arg_costs:
        arg_sum = add(arg_sum, cost)
    k8s = _K8S.get(str(e.value))
    found = k8s(c, e, overload) if k8s is not None else None
    if found is None and e.value == "_==_":
        found = _k8s_equals(c, e)
    if found is not None:
        return add(found[0], arg_sum), found[1]
    std = _STD.get(overload)
    found = std(c, e, arg_costs) if std is not None else None
    if found is not None:
        cost, size = found
        return (cost if overload in _NO_ARG_SUM else add(cost, arg_sum)), size
    return add(ONE, arg_sum), None


# --- cel-go's standard estimates (cost before the arguments are added) ---------------------

Std = Callable[[Sizes, Expr, list[Est]], Call | None]
_NO_ARG_SUM = {"logical_or", "logical_and", "conditional"}


def _traverse_arg(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    if len(e.args) != 1:
        return None
    return factor(c.size_or_unknown(e.args[0]), STRING_TRAVERSAL), None


def _in_list(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    return (c.size_or_unknown(e.args[1]), None) if len(e.args) == 2 else None


def _matches(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    if e.operand is None or len(e.args) != 1:
        return None
    text = factor(add(c.size_or_unknown(e.operand), ONE), STRING_TRAVERSAL)
    return mul(text, factor(c.size_or_unknown(e.args[0]), REGEX_LENGTH)), None


def _contains(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    if e.operand is None or len(e.args) != 1:
        return None
    text = factor(c.size_or_unknown(e.operand), STRING_TRAVERSAL)
    return mul(text, factor(c.size_or_unknown(e.args[0]), STRING_TRAVERSAL)), None


def _logical(_c: Sizes, _e: Expr, arg_costs: list[Est]) -> Call | None:
    lhs, rhs = arg_costs
    return (lhs[0], add(lhs, rhs)[1]), None


def _conditional(c: Sizes, e: Expr, arg_costs: list[Est]) -> Call | None:
    _, yes, no = e.args
    yes_entry, no_entry = c.entry(yes), c.entry(no)
    if yes_entry is not None and no_entry is not None:
        keys, values = union(yes_entry[1], no_entry[1]), union(yes_entry[2], no_entry[2])
        c.set_entry(e, (yes_entry[0], keys, values))
    size = union(c.size_or_unknown(yes), c.size_or_unknown(no))
    return add(arg_costs[0], union(arg_costs[1], arg_costs[2])), size


def _concat(is_list: bool) -> Std:
    def estimate(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
        if len(e.args) != 2:
            return None
        left, right = e.args
        size = add(c.size_or_unknown(left), c.size_or_unknown(right))
        left_entry, right_entry = c.entry(left), c.entry(right)
        if left_entry is not None and right_entry is not None:
            keys, values = (
                union(left_entry[1], right_entry[1]),
                union(left_entry[2], right_entry[2]),
            )
            c.set_entry(e, (left_entry[0], keys, values))
        return (ONE if is_list else factor(size, STRING_TRAVERSAL)), size

    return estimate


def _compare_by_size(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    smallest = min(c.size_or_unknown(e.args[0])[1], c.size_or_unknown(e.args[1])[1])
    return factor((1 if smallest > 0 else 0, smallest), STRING_TRAVERSAL), None


def _convert_string(to_bytes: bool) -> Std:
    def estimate(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
        if len(e.args) != 1:
            return None
        size = c.size_or_unknown(e.args[0])
        result = (size[0], min(size[1] * 4, MAX)) if to_bytes else (size[0] // 4, size[1])
        return factor(size, STRING_TRAVERSAL), result

    return estimate


def _quote(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    if len(e.args) != 1:
        return None
    size = c.size_or_unknown(e.args[0])
    return factor(size, STRING_TRAVERSAL), (min(size[0] + 2, MAX), min(size[1] * 2 + 2, MAX))


def _format(c: Sizes, e: Expr, _: list[Est]) -> Call | None:
    return (factor(c.size_or_unknown(e.operand), STRING_TRAVERSAL), None) if e.operand else None


_SIZE_COMPARISONS = ["equals", "not_equals"] + [
    f"{op}_{kind}"
    for op in ("less", "less_equals", "greater", "greater_equals")
    for kind in ("string", "bytes")
]
_STD: dict[str, Std] = {
    "starts_with_string": _traverse_arg,
    "ends_with_string": _traverse_arg,
    "in_list": _in_list,
    "matches_string": _matches,
    "contains_string": _contains,
    "logical_or": _logical,
    "logical_and": _logical,
    "conditional": _conditional,
    "add_string": _concat(is_list=False),
    "add_bytes": _concat(is_list=False),
    "add_list": _concat(is_list=True),
    "string_to_bytes": _convert_string(to_bytes=True),
    "bytes_to_string": _convert_string(to_bytes=False),
    "strings_quote": _quote,
    "string_format": _format,
    **dict.fromkeys(_SIZE_COMPARISONS, _compare_by_size),
}


# --- Kubernetes' library (cost without the arguments) ------------------------------------

K8s = Callable[[Sizes, Expr, str], Call | None]


def _size(c: Sizes, e: Expr) -> Est:
    found = c.size(e)
    return found if found is not None else UNKNOWN


def _list_walk(c: Sizes, e: Expr, _: str) -> Call | None:
    """isSorted, sum, max, min, indexOf, lastIndexOf: one pass over the target."""
    if e.operand is None:
        return None
    target_type = c.type_of(e.operand)
    if target_type.kind != "list":
        return factor(_size(c, e.operand), STRING_TRAVERSAL), None
    per_item = ONE
    if target_type.params[0].kind in ("string", "bytes"):
        per_item = add(ONE, factor(c.items_size(e.operand) or UNKNOWN, STRING_TRAVERSAL))
    return mul(_size(c, e.operand), per_item), None


def _of_arg(scale: float, keep_size: bool) -> K8s:
    def estimate(c: Sizes, e: Expr, _: str) -> Call | None:
        if not e.args:
            return None
        size = _size(c, e.args[0])
        return factor(size, scale), size if keep_size else None

    return estimate


def _of_target(c: Sizes, e: Expr, _: str) -> Call | None:
    if e.operand is None:
        return None
    size = _size(c, e.operand)
    return factor(size, STRING_TRAVERSAL), size


def _replace(c: Sizes, e: Expr, _: str) -> Call | None:
    if e.operand is None or len(e.args) < 2:
        return None
    size = _size(c, e.operand)
    old, new = _size(c, e.args[0]), _size(c, e.args[1])
    count_max, keep_max = _replacements(size[1], old[0], new[1], upper=True)
    count_min, keep_min = _replacements(size[0], old[1], new[0], upper=False)
    result = add(mul((count_min, count_max), new), (keep_min, keep_max))
    return factor(size, 2 * STRING_TRAVERSAL), result


def _replacements(size: int, old: int, new: int, upper: bool) -> tuple[int, int]:
    """One bound of (how many replacements, how much of the string is kept)."""
    if old == 0:
        return (size + 1 if size < MAX else size), size
    if (new <= old) if upper else (old <= new):
        return 0, size
    return math.ceil(size / old), 0


def _split(c: Sizes, e: Expr, _: str) -> Call | None:
    if e.operand is None:
        return None
    size = _size(c, e.operand)
    top = size[1]
    if len(e.args) > 1 and e.args[1].kind == "lit" and e.args[1].lit_type == "int":
        top = int(e.args[1].value)
    return factor(size, 2 * STRING_TRAVERSAL), (0, top)


def _join(c: Sizes, e: Expr, _: str) -> Call | None:
    if e.operand is None:
        return None
    count = _size(c, e.operand)
    size: Est = (0, 0)
    if c.type_of(e.operand).kind == "list":
        size = mul(count, c.items_size(e.operand) or UNKNOWN)
    if e.args:
        separators = (max(count[0] - 1, 0), max(count[1] - 1, 0))
        size = add(size, mul(_size(c, e.args[0]), separators))
    return factor(size, STRING_TRAVERSAL), size


def _find(c: Sizes, e: Expr, _: str) -> Call | None:
    if e.operand is None or not e.args:
        return None
    size = _size(c, e.operand)
    text = factor(add(size, ONE), STRING_TRAVERSAL)
    return mul(text, factor(_size(c, e.args[0]), REGEX_LENGTH)), (0, size[1])


def _ip(c: Sizes, e: Expr, overload: str) -> Call | None:
    if overload == "cidr_ip":
        return ONE, None
    return _of_arg(STRING_TRAVERSAL, False)(c, e, overload)


def _contains_network(c: Sizes, e: Expr, overload: str) -> Call | None:
    if not e.args:
        return None
    ip: Est = (4, 16)
    cost = factor(add(ip, ip), STRING_TRAVERSAL)
    if e.value == "containsCIDR":
        cost = add(add(cost, factor(ip, STRING_TRAVERSAL)), ONE)
    if overload in ("cidr_contains_ip_string", "cidr_contains_cidr_string"):
        cost = add(cost, factor(_size(c, e.args[0]), STRING_TRAVERSAL))
    return cost, None


def _validate(c: Sizes, e: Expr, _: str) -> Call | None:
    if not e.args:
        return None
    size = factor(_size(c, e.args[0]), STRING_TRAVERSAL)
    return factor(size, MAX_NAME_FORMAT_REGEX_SIZE * REGEX_LENGTH), None


def _unit(_c: Sizes, _e: Expr, _o: str) -> Call | None:
    return ONE, None


def _k8s_equals(c: Sizes, e: Expr) -> Call | None:
    """``_==_`` of two Kubernetes values of one type."""
    if len(e.args) != 2:
        return None
    lhs, rhs = c.type_of(e.args[0]), c.type_of(e.args[1])
    if lhs != rhs or lhs.kind != "object" or not lhs.name.startswith(("kubernetes.", "net.")):
        return None
    if lhs.name == "kubernetes.NamedFormat":
        return factor((1, MAX_FORMAT_SIZE), STRING_TRAVERSAL), None
    if lhs.name == "kubernetes.URL":
        size = c.size(e.args[1])
        return factor((1, size[1] if size else 1), STRING_TRAVERSAL), None
    return ONE, None


_UNIT = [
    "masked",
    "prefixLength",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "format.named",
    "sign",
    "asInteger",
    "isInteger",
    "asApproximateFloat",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    "add",
    "sub",
    "major",
    "minor",
    "patch",
    "getScheme",
    "getHostname",
    "getHost",
    "getPort",
    "getEscapedPath",
    "getQuery",
]
_K8S: dict[str, K8s] = {
    **dict.fromkeys(["isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"], _list_walk),
    **dict.fromkeys(["url", "jsonpatch.escapeKey"], _of_arg(STRING_TRAVERSAL, True)),
    **dict.fromkeys(["lowerAscii", "upperAscii", "substring", "trim"], _of_target),
    "replace": _replace,
    "split": _split,
    "join": _join,
    **dict.fromkeys(["find", "findAll"], _find),
    **dict.fromkeys(
        ["cidr", "isIP", "isCIDR", "quantity", "isQuantity", "semver", "isSemver"],
        _of_arg(STRING_TRAVERSAL, False),
    ),
    "ip": _ip,
    "ip.isCanonical": _of_arg(2 * STRING_TRAVERSAL, False),
    **dict.fromkeys(_UNIT, _unit),
    **dict.fromkeys(["containsIP", "containsCIDR"], _contains_network),
    "validate": _validate,
}
