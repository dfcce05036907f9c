"""apiextensions' internal Go structs as ``json.Marshal`` prints them in error values.

Pure layer. Some apiserver errors print a whole internal struct as the bad value
(``Invalid value: {"Rule":"self.x",...}``); the internal types of apiextensions-apiserver
v0.36.3 (``pkg/apis/apiextensions/types.go``, ``types_jsonschema.go``) have no JSON tags,
so Go writes every field under its Go name, zero values included, in declaration order.
This module renders our wire-form dicts that way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from disagg_operator.emulator.apiserver.field import GoJSON, go_json

# (Go name, wire key, kind); kinds: str bool ptr json slice:<elem> map:<elem> struct:<T>
# ptr:<T> (a pointer to struct T), items, orbool, deps
_SCHEMA = [
    ("ID", "id", "str"),
    ("Schema", "$schema", "str"),
    ("Ref", "$ref", "ptr"),
    ("Description", "description", "str"),
    ("Type", "type", "str"),
    ("Nullable", "nullable", "bool"),
    ("Format", "format", "str"),
    ("Title", "title", "str"),
    ("Default", "default", "ptr"),
    ("Maximum", "maximum", "ptr"),
    ("ExclusiveMaximum", "exclusiveMaximum", "bool"),
    ("Minimum", "minimum", "ptr"),
    ("ExclusiveMinimum", "exclusiveMinimum", "bool"),
    ("MaxLength", "maxLength", "ptr"),
    ("MinLength", "minLength", "ptr"),
    ("Pattern", "pattern", "str"),
    ("MaxItems", "maxItems", "ptr"),
    ("MinItems", "minItems", "ptr"),
    ("UniqueItems", "uniqueItems", "bool"),
    ("MultipleOf", "multipleOf", "ptr"),
    ("Enum", "enum", "slice:json"),
    ("MaxProperties", "maxProperties", "ptr"),
    ("MinProperties", "minProperties", "ptr"),
    ("Required", "required", "slice:json"),
    ("Items", "items", "items"),
    ("AllOf", "allOf", "slice:Schema"),
    ("OneOf", "oneOf", "slice:Schema"),
    ("AnyOf", "anyOf", "slice:Schema"),
    ("Not", "not", "ptr:Schema"),
    ("Properties", "properties", "map:Schema"),
    ("AdditionalProperties", "additionalProperties", "orbool"),
    ("PatternProperties", "patternProperties", "map:Schema"),
    ("Dependencies", "dependencies", "deps"),
    ("AdditionalItems", "additionalItems", "orbool"),
    ("Definitions", "definitions", "map:Schema"),
    ("ExternalDocs", "externalDocs", "ptr:Docs"),
    ("Example", "example", "ptr"),
    ("XPreserveUnknownFields", "x-kubernetes-preserve-unknown-fields", "ptr"),
    ("XEmbeddedResource", "x-kubernetes-embedded-resource", "bool"),
    ("XIntOrString", "x-kubernetes-int-or-string", "bool"),
    ("XListMapKeys", "x-kubernetes-list-map-keys", "slice:json"),
    ("XListType", "x-kubernetes-list-type", "ptr"),
    ("XMapType", "x-kubernetes-map-type", "ptr"),
    ("XValidations", "x-kubernetes-validations", "slice:Rule"),
]
SCHEMA_FIELDS = [(go, wire) for go, wire, _ in _SCHEMA]
"""JSONSchemaProps' fields in Go's declaration order: (Go name, wire key)."""

_STRUCTS: dict[str, list[tuple[str, str, str]]] = {
    "Schema": _SCHEMA,
    "Docs": [("Description", "description", "str"), ("URL", "url", "str")],
    "Rule": [
        ("Rule", "rule", "str"),
        ("Message", "message", "str"),
        ("MessageExpression", "messageExpression", "str"),
        ("Reason", "reason", "ptr"),
        ("FieldPath", "fieldPath", "str"),
        ("OptionalOldSelf", "optionalOldSelf", "ptr"),
    ],
    "Version": [
        ("Name", "name", "str"),
        ("Served", "served", "bool"),
        ("Storage", "storage", "bool"),
        ("Deprecated", "deprecated", "bool"),
        ("DeprecationWarning", "deprecationWarning", "ptr"),
        ("Schema", "schema", "ptr:Validation"),
        ("Subresources", "subresources", "ptr:Subresources"),
        ("AdditionalPrinterColumns", "additionalPrinterColumns", "slice:Column"),
        ("SelectableFields", "selectableFields", "slice:Selectable"),
    ],
    "Validation": [("OpenAPIV3Schema", "openAPIV3Schema", "ptr:Schema")],
    "Subresources": [("Status", "status", "ptr:Empty"), ("Scale", "scale", "ptr:Scale")],
    "Empty": [],
    "Scale": [
        ("SpecReplicasPath", "specReplicasPath", "str"),
        ("StatusReplicasPath", "statusReplicasPath", "str"),
        ("LabelSelectorPath", "labelSelectorPath", "ptr"),
    ],
    "Column": [
        ("Name", "name", "str"),
        ("Type", "type", "str"),
        ("Format", "format", "str"),
        ("Description", "description", "str"),
        ("Priority", "priority", "int"),
        ("JSONPath", "jsonPath", "str"),
    ],
    "Selectable": [("JSONPath", "jsonPath", "str")],
}


def _string(text: str) -> str:
    return go_json(text)


def _render(kind: str, value: Any) -> str:
    if kind == "str":
        return _string(str(value or ""))
    if kind == "bool":
        return "true" if value else "false"
    if kind == "int":
        return str(int(value or 0))
    if kind in ("ptr", "json"):
        return "null" if value is None else go_json(value)
    if value is None:
        return "null"
    head, _, elem = kind.partition(":")
    if head == "slice":
        return "[" + ",".join(_render(_elem(elem), v) for v in value) + "]"
    if head == "map":
        items = (f"{_string(k)}:{_render(_elem(elem), value[k])}" for k in sorted(value))
        return "{" + ",".join(items) + "}"
    if head in ("ptr", "struct"):
        return struct(elem, value)
    if head == "items":
        if isinstance(value, list):
            return '{"Schema":null,"JSONSchemas":' + _render("slice:Schema", value) + "}"
        return '{"Schema":' + struct("Schema", value) + ',"JSONSchemas":null}'
    if head == "orbool":
        if isinstance(value, Mapping):
            return '{"Allows":true,"Schema":' + struct("Schema", value) + "}"
        return '{"Allows":' + ("true" if value else "false") + ',"Schema":null}'
    if head == "deps":
        return _render_deps(value)
    raise ValueError(f"unknown kind {kind}")


def _render_deps(value: Mapping[str, Any]) -> str:
    parts = []
    for k in sorted(value):
        v = value[k]
        if isinstance(v, list):
            body = '{"Schema":null,"Property":' + json.dumps(v) + "}"
        else:
            body = '{"Schema":' + struct("Schema", v) + ',"Property":null}'
        parts.append(f"{_string(k)}:{body}")
    return "{" + ",".join(parts) + "}"


def _elem(name: str) -> str:
    return "json" if name == "json" else f"struct:{name}"


def struct(name: str, value: Mapping[str, Any]) -> str:
    """The Go struct ``name`` holding the wire-form ``value``, as ``json.Marshal`` writes it."""
    parts = [f'"{go}":{_render(kind, value.get(wire))}' for go, wire, kind in _STRUCTS[name]]
    return "{" + ",".join(parts) + "}"


def validation_rule(rule: Mapping[str, Any]) -> GoJSON:
    return GoJSON(struct("Rule", rule))


def schema_props(schema: Mapping[str, Any]) -> GoJSON:
    return GoJSON(struct("Schema", schema))


def versions(items: list[Mapping[str, Any]]) -> GoJSON:
    return GoJSON("[" + ",".join(struct("Version", v) for v in items) + "]")


def items_value(items: Any) -> GoJSON:
    """A ``*JSONSchemaPropsOrArray`` (the ``items`` of a schema)."""
    return GoJSON(_render("items", items))
