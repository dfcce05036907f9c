"""Pass-through core/v1 fields checked as an API server would, before anything is created.

Two halves:

- :func:`schema_problems`: a value against its structural schema
  (:mod:`disagg_operator.api.corev1`): types, int-or-string, required fields, enums and
  unknown fields (refused, as ``kubectl apply``'s strict field validation does). ``null``
  counts as absent, as the API server prunes it. The CRD carries the same schemas, so a
  cluster refuses the same values at apply; this is for ``disagg render``, ``disagg up``
  and a resource an admission step let through.
- the API server's own rules for pods that no schema states (its Go validation,
  ``pkg/apis/core/validation``), for the shapes users pass: an env var has ``value`` or
  ``valueFrom``, not both, and a ``valueFrom`` names exactly one source; a volume has one
  source and a DNS-label name; container names are DNS labels; an extended resource
  (a GPU, an RDMA device) is a whole number whose request, if any, equals its limit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from disagg_operator.api import rules
from disagg_operator.api.corev1 import SCHEMAS
from disagg_operator.api.problems import Problem
from disagg_operator.derive.resources import parse_quantity

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_NAMES = {"object": "an object", "array": "a list", "integer": "an integer"}


def schema_problems(path: str, value: Any, kind: str) -> list[Problem]:
    """Problems of ``value`` (at field ``path``) as a core/v1 ``kind``."""
    return list(_check(path, value, SCHEMAS[kind]))


def _check(path: str, value: Any, schema: dict[str, Any]) -> Iterator[Problem]:
    if value is None:
        return
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            yield Problem(path, f"must be an integer or a string (got {value!r})")
        return
    kind = schema.get("type")
    if kind is not None:
        expected = _TYPES[kind]
        if isinstance(value, bool) != (kind == "boolean") or not isinstance(value, expected):
            yield Problem(path, f"must be {_NAMES.get(kind, 'a ' + kind)} (got {value!r})")
            return
    if "enum" in schema and value not in schema["enum"]:
        yield Problem(path, f"must be one of {', '.join(map(str, schema['enum']))} (got {value!r})")
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            yield from _check(f"{path}[{n}]", item, schema["items"])
    if isinstance(value, dict):
        yield from _object(path, value, schema)


def _object(path: str, value: dict[str, Any], schema: dict[str, Any]) -> Iterator[Problem]:
    props, extra = schema.get("properties"), schema.get("additionalProperties")
    for name in schema.get("required", []):
        if value.get(name) is None:
            yield Problem(f"{path}.{name}", "required; add it")
    for key, item in value.items():
        if props is not None and key in props:
            yield from _check(f"{path}.{key}", item, props[key])
        elif extra is not None:
            yield from _check(f"{path}.{key}", item, extra)
        elif props is not None:
            yield Problem(
                f"{path}.{key}", "unknown field; remove it or check its spelling (camelCase)"
            )


def env_problems(path: str, env: dict[str, Any]) -> Iterator[Problem]:
    """An env var's value rules (the API server's validateEnv)."""
    if env.get("value") is not None and env.get("valueFrom") is not None:
        yield rules.ENV_VALUE_RULE.problem(path)
    source = env.get("valueFrom")
    known = SCHEMAS["EnvVarSource"]["properties"]
    if isinstance(source, dict) and set(source) <= set(known):  # else the schema says
        named = [k for k, v in source.items() if v is not None]
        if len(named) != 1:
            yield Problem(
                f"{path}.valueFrom",
                f"must name exactly one source ({', '.join(sorted(known))}); got "
                f"{', '.join(named) or 'none'}",
            )


def volume_problems(path: str, volume: dict[str, Any]) -> Iterator[Problem]:
    """A volume's rules: a DNS-label name and exactly one source."""
    name = volume.get("name")
    if isinstance(name, str) and not DNS_LABEL.match(name):
        yield Problem(f"{path}.name", f"{name!r} is not a DNS label (lower case, digits, '-')")
    sources = [k for k, v in volume.items() if k != "name" and v is not None]
    if len(sources) != 1:
        yield Problem(
            path,
            "must have exactly one volume source (persistentVolumeClaim, secret, configMap, "
            f"emptyDir, ...); got {', '.join(sources) or 'none'}",
        )


def container_name_problems(path: str, name: Any) -> Iterator[Problem]:
    if isinstance(name, str) and not DNS_LABEL.match(name):
        yield Problem(path, f"{name!r} is not a DNS label (lower case, digits, '-')")


def extended(resource: str) -> bool:
    """An extended resource (``nvidia.com/gpu``, ``rdma/hca``): a domain-prefixed name outside
    ``kubernetes.io``, not a quota's ``requests.`` name (the API server's
    IsExtendedResourceName). Such a resource is a whole number and cannot be overcommitted."""
    return (
        "/" in resource
        and "kubernetes.io/" not in resource
        and not resource.startswith("requests.")
    )


def resource_problems(
    path: str, requests: dict[str, Any], limits: dict[str, Any]
) -> Iterator[Problem]:
    """A container's extended resources as the API server takes them
    (validateResourceRequirements, validateResourceQuantityValue): whole numbers, and a
    request needs a limit and equals it (a limit alone is the request too)."""
    for where, source in (("requests", requests), ("limits", limits)):
        for key, value in source.items():
            if extended(key) and _fraction(value):
                yield Problem(
                    f"{path}.{where}[{key}]",
                    f"{value!r} must be a whole number: {key} is an extended resource, "
                    "counted in whole devices",
                )
    for key, value in requests.items():
        if not extended(key) or _fraction(value):
            continue
        if key not in limits:
            yield Problem(
                f"{path}.limits[{key}]",
                f"{key} cannot be overcommitted: a request needs a limit; set "
                f"limits[{key}]: {value} and omit the request (it defaults to the limit)",
            )
        elif not _fraction(limits[key]) and parse_quantity(value) != parse_quantity(limits[key]):
            yield Problem(
                f"{path}.requests[{key}]",
                f"{value} must equal its limit {limits[key]} ({key} cannot be overcommitted); "
                "omit the request (it defaults to the limit)",
            )


def _fraction(value: Any) -> bool:
    try:
        number = parse_quantity(value)
    except ValueError:
        return False  # not a quantity at all: reported by the caller's own parse
    return bool(number != int(number))
