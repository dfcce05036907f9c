"""Kubernetes quantities and a pool's CPU and memory budget, read from its resources.

Validation checks the quantities with :func:`parse_quantity`; engines size their threads and
caches from :func:`cpu_limits`.
"""

from __future__ import annotations

import re

from disagg_operator.api import RoleSpec

_SUFFIX = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "m": 10**-3,
}
_QUANTITY = re.compile(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([A-Za-z]*)$")


def parse_quantity(value: int | str) -> float:
    """A Kubernetes quantity ("16Gi", "500m", 2) as a number of base units."""
    if isinstance(value, int):
        return float(value)
    match = _QUANTITY.match(value.strip())
    if match is None or match.group(2) not in {"", *_SUFFIX}:
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 16Gi, 500m, 2)")
    return float(match.group(1)) * _SUFFIX.get(match.group(2), 1)


def _limit(role: RoleSpec, name: str) -> float | None:
    resources = role.resources
    for source in (resources.limits, resources.requests) if resources else ():
        if source and name in source:
            return parse_quantity(source[name])
    return None


def cpu_limits(role: RoleSpec) -> tuple[float | None, float | None]:
    """(CPUs, memory bytes) of a pool: CPUs from limits else requests, memory from limits."""
    memory = None
    if role.resources and role.resources.limits and "memory" in role.resources.limits:
        memory = parse_quantity(role.resources.limits["memory"])
    return _limit(role, "cpu"), memory
