"""A CRD schema node as kube-openapi's validator reads it, compiled once per CRD.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/validation/validation.go``
(``ConvertJSONSchemaPropsWithPostProcess``: int-or-string typed ``[integer, string]``,
unsupported formats dropped) and ``pkg/apiserver/schema/kubeopenapi.go`` (``ToKubeOpenAPI``,
which a schema's defaults are checked against: neither of those).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from disagg_tools.emulator.apiserver import formats


@dataclass(eq=False)
class Node:
    """One schema node, as kube-openapi's ``SchemaValidator`` sees it."""

    raw: dict[str, Any]
    types: tuple[str, ...] = ()
    nullable: bool = False
    format: str = ""
    enum: list[Any] | None = None
    maximum: float | None = None
    exclusive_maximum: bool = False
    minimum: float | None = None
    exclusive_minimum: bool = False
    multiple_of: float | None = None
    max_length: int | None = None
    min_length: int | None = None
    pattern: str = ""
    max_items: int | None = None
    min_items: int | None = None
    unique_items: bool = False
    max_properties: int | None = None
    min_properties: int | None = None
    required: tuple[str, ...] = ()
    properties: dict[str, Node] = field(default_factory=dict)
    # additionalProperties: None when absent, else (allows, schema or None)
    additional: tuple[bool, Node | None] | None = None
    items: Node | None = None
    all_of: list[Node] = field(default_factory=list)
    any_of: list[Node] = field(default_factory=list)
    one_of: list[Node] = field(default_factory=list)
    not_: Node | None = None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _count(value: Any) -> int | None:
    return None if value is None else int(value)


def compile_schema(raw: dict[str, Any], *, converted: bool = True) -> Node:
    """The validator's view of ``raw`` (a CRD ``openAPIV3Schema`` node): as converted for a
    custom resource's writes, or (``converted=False``) as ``ToKubeOpenAPI`` gives it."""
    types: tuple[str, ...] = (raw["type"],) if raw.get("type") else ()
    if converted and raw.get("x-kubernetes-int-or-string"):
        types = ("integer", "string")
    sub = functools.partial(compile_schema, converted=converted)
    node = Node(
        raw=raw,
        types=types,
        nullable=bool(raw.get("nullable")),
        format=formats.effective(raw, list(types)) if converted else str(raw.get("format") or ""),
        enum=raw.get("enum"),
        maximum=_number(raw.get("maximum")),
        exclusive_maximum=bool(raw.get("exclusiveMaximum")),
        minimum=_number(raw.get("minimum")),
        exclusive_minimum=bool(raw.get("exclusiveMinimum")),
        multiple_of=_number(raw.get("multipleOf")),
        max_length=_count(raw.get("maxLength")),
        min_length=_count(raw.get("minLength")),
        pattern=str(raw.get("pattern") or ""),
        max_items=_count(raw.get("maxItems")),
        min_items=_count(raw.get("minItems")),
        unique_items=bool(raw.get("uniqueItems")),
        max_properties=_count(raw.get("maxProperties")),
        min_properties=_count(raw.get("minProperties")),
        required=tuple(raw.get("required") or ()),
        properties={k: sub(v) for k, v in (raw.get("properties") or {}).items()},
        all_of=[sub(s) for s in raw.get("allOf") or ()],
        any_of=[sub(s) for s in raw.get("anyOf") or ()],
        one_of=[sub(s) for s in raw.get("oneOf") or ()],
    )
    if "additionalProperties" in raw:
        additional = raw["additionalProperties"]
        if isinstance(additional, dict):
            node.additional = (True, sub(additional))
        else:
            node.additional = (bool(additional), None)
    if isinstance(raw.get("items"), dict):
        node.items = sub(raw["items"])
    if isinstance(raw.get("not"), dict):
        node.not_ = sub(raw["not"])
    return node


def unported_formats(raw: Any, path: str = "") -> list[str]:
    """Paths (and names) of supported string formats :mod:`.formats` does not check."""
    found: list[str] = []
    if isinstance(raw, dict):
        name = raw.get("format")
        if isinstance(name, str) and formats.unported(name):
            found.append(f"{path or '<root>'}: {name}")
        for k, v in raw.items():
            if k not in ("default", "enum", "example", "x-kubernetes-validations"):
                found.extend(unported_formats(v, f"{path}.{k}" if path else k))
    elif isinstance(raw, list):
        for i, v in enumerate(raw):
            found.extend(unported_formats(v, f"{path}[{i}]"))
    return found
