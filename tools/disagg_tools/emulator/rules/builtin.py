"""Built-in objects (Pods, Services, PodDisruptionBudgets, ...) checked against the API
server's own OpenAPI schema for their kind at one named Kubernetes release, as a write to
an API server is: fields it does not declare are *unknown* (refused, warned of or dropped,
as the request's ``fieldValidation`` says), values of the wrong type or outside an enum
are *invalid*.

Pure: the schemas are kubernetes-validate's offline copy of Kubernetes' OpenAPI (the
"strict" form: ``additionalProperties: false`` wherever the API declares its fields), read
once per kind. It is the schema check only; the API server's hand-written validation of
each kind (name formats, immutable fields) is not ported, except what
:func:`disagg_tools.emulator.rules.ops.validate` names.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, NamedTuple

import jsonschema
from referencing import Registry, Resource

from disagg_operator.api import corev1

KUBERNETES = corev1.KUBERNETES  # the release the pass-through shapes come from too
_ROOT = "kubernetes-json-schema"


class Findings(NamedTuple):
    """What the schema says of one object: unknown fields (paths as the API server names
    them, ``spec.containers[0].foo``) and other errors (``path: what``)."""

    unknown: list[str]
    invalid: list[str]


def _read(name: str) -> Any:
    folder = resources.files("kubernetes_validate").joinpath(_ROOT, f"v{KUBERNETES}-local-strict")
    return json.loads(folder.joinpath(name).read_text())


@functools.cache
def _definitions() -> Resource[Any]:
    return Resource.from_contents(_read("_definitions.json"))


@functools.cache
def validator(kind: str, api_version: str) -> jsonschema.Draft202012Validator | None:
    """The compiled schema of ``kind`` in ``api_version`` (None: not a built-in kind)."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = _read(f"{kind.lower()}-{group_version}.json")
    except FileNotFoundError:
        return None
    registry: Registry[Any] = _definitions() @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def definitions() -> Mapping[str, Any]:
    """Kubernetes' own definitions by name (``io.k8s.api.core.v1.PodSpec``), whose
    ``$ref`` name others of them; read-only."""
    defs: Mapping[str, Any] = _definitions().contents["$defs"]
    return defs


def check(obj: Mapping[str, Any]) -> Findings:
    """Unknown and invalid fields of a built-in object (none for a kind with no schema)."""
    found = validator(str(obj.get("kind")), str(obj.get("apiVersion")))
    return Findings([], []) if found is None else findings(found, obj)


def findings(schema: jsonschema.Draft202012Validator, obj: Mapping[str, Any]) -> Findings:
    """Unknown and invalid fields of ``obj`` by the compiled ``schema``."""
    unknown: list[str] = []
    invalid: list[str] = []
    for error in _leaves(schema.iter_errors(obj)):
        where = path(error.absolute_path)
        if error.validator == "additionalProperties":
            declared = set((error.schema or {}).get("properties") or {})
            extra = sorted(k for k in error.instance if k not in declared)
            unknown += [path([*error.absolute_path, k]) for k in extra]
        else:
            invalid.append(f"{where or '<root>'}: {error.message}")
    return Findings(sorted(set(unknown)), invalid)


def _leaves(errors: Iterable[jsonschema.ValidationError]) -> Iterable[jsonschema.ValidationError]:
    """The errors themselves, or for a union (oneOf/anyOf) the best of its branches."""
    for error in errors:
        if error.context:
            yield jsonschema.exceptions.best_match(error.context) or error
        else:
            yield error


def path(parts: Iterable[Any]) -> str:
    """``spec.containers[0].name`` from a JSON path's parts."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def pruned(obj: Mapping[str, Any], unknown: Iterable[str]) -> dict[str, Any]:
    """``obj`` without the ``unknown`` fields (what the API server stores when it drops
    them); the paths are :func:`check`'s."""
    out: dict[str, Any] = json.loads(json.dumps(obj))
    for where in unknown:
        parts = re.findall(r"[^.\[\]]+", where)
        node: Any = out
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node.get(part)
            if node is None:
                break
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return out
