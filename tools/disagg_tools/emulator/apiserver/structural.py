"""A CRD's ``openAPIV3Schema`` in kube-apiserver's structural form.

Ports apiextensions-apiserver v0.36.3 ``pkg/apiserver/schema/structural.go`` and
``convert.go`` (``NewStructural``); empty and absent stay apart where Go keeps a nil slice
apart from an empty one, since the int-or-string exemption is a ``reflect.DeepEqual``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Schema = Mapping[str, Any]


class StructuralError(ValueError):
    """``NewStructural`` refused the schema (upstream's error text)."""


@dataclass
class Generic:
    """Fields that never belong inside a logical junctor."""

    type: str = ""
    description: str = ""
    title: str = ""
    default: Any = None  # None: absent (a JSON null default is dropped on decode)
    nullable: bool = False
    external_docs: dict[str, str] | None = None
    example: Any = None


@dataclass
class Extensions:
    """The ``x-kubernetes-*`` extensions that shape a value."""

    preserve_unknown_fields: bool = False
    embedded_resource: bool = False
    int_or_string: bool = False
    list_map_keys: list[str] | None = None
    list_type: str | None = None
    map_type: str | None = None


@dataclass
class ValueValidation:
    """Validations that do not change a value's shape (None: unset, as Go's nil)."""

    format: str = ""
    maximum: float | None = None
    exclusive_maximum: bool = False
    minimum: float | None = None
    exclusive_minimum: bool = False
    max_length: int | None = None
    min_length: int | None = None
    pattern: str = ""
    max_items: int | None = None
    min_items: int | None = None
    unique_items: bool = False
    multiple_of: float | None = None
    enum: list[Any] | None = None
    max_properties: int | None = None
    min_properties: int | None = None
    required: list[str] | None = None
    all_of: list[NestedValueValidation] | None = None
    one_of: list[NestedValueValidation] | None = None
    any_of: list[NestedValueValidation] | None = None
    not_: NestedValueValidation | None = None


@dataclass
class NestedValueValidation:
    """A junctor's clause: value validations plus what would make it non-structural."""

    value_validation: ValueValidation = field(default_factory=ValueValidation)
    x_validations: list[dict[str, Any]] | None = None
    items: NestedValueValidation | None = None
    properties: dict[str, NestedValueValidation] | None = None
    additional_properties: NestedValueValidation | None = None
    forbidden_generics: Generic = field(default_factory=Generic)
    forbidden_extensions: Extensions = field(default_factory=Extensions)


@dataclass
class StructuralOrBool:
    structural: Structural | None = None
    allows: bool = False


@dataclass
class Structural:
    """One node of a structural schema."""

    items: Structural | None = None
    properties: dict[str, Structural] | None = None
    additional_properties: StructuralOrBool | None = None
    generic: Generic = field(default_factory=Generic)
    extensions: Extensions = field(default_factory=Extensions)
    x_validations: list[dict[str, Any]] | None = None
    value_validation: ValueValidation | None = None

    @property
    def type(self) -> str:
        return self.generic.type

    def props(self) -> dict[str, Structural]:
        return self.properties or {}


# --- NewStructural ---------------------------------------------------------------------------

_UNSUPPORTED = (
    ("id", "id"),
    ("$schema", "schema"),
    ("$ref", "$ref"),
    ("patternProperties", "patternProperties"),
    ("dependencies", "dependencies"),
    ("additionalItems", "additionalItems"),
    ("definitions", "definitions"),
)


def new_structural(schema: Schema | None) -> Structural | None:
    """``NewStructural``: the structural form, or :class:`StructuralError` with upstream's
    message for what it cannot hold."""
    if schema is None:
        return None
    _check_unsupported(schema)
    value_validation = _value_validation(schema)  # upstream's order decides which error wins
    node = Structural(
        generic=_generic(schema),
        extensions=_extensions(schema),
        value_validation=value_validation,
        x_validations=_rules(schema),
    )
    items = schema.get("items")
    if items is not None:
        if isinstance(items, list):
            if items:
                raise StructuralError("OpenAPIV3Schema 'items' must be a schema, but is an array")
        else:
            node.items = new_structural(items)
    properties = schema.get("properties") or {}
    if properties:
        node.properties = {k: _required(new_structural(v)) for k, v in sorted(properties.items())}
    additional = schema.get("additionalProperties")
    if additional is not None:
        if isinstance(additional, Mapping):
            node.additional_properties = StructuralOrBool(new_structural(additional), True)
        else:
            node.additional_properties = StructuralOrBool(None, bool(additional))
    return node


def _required(node: Structural | None) -> Structural:
    assert node is not None
    return node


def _check_unsupported(schema: Schema) -> None:
    for key, name in _UNSUPPORTED:
        value = schema.get(key)
        present = value is not None if key in ("$ref", "additionalItems") else bool(value)
        if present and not (key == "$ref" and value == ""):
            raise StructuralError(f"OpenAPIV3Schema '{name}' is not supported")


def _generic(schema: Schema) -> Generic:
    docs = schema.get("externalDocs")
    return Generic(
        type=schema.get("type") or "",
        description=schema.get("description") or "",
        title=schema.get("title") or "",
        default=schema.get("default"),
        nullable=bool(schema.get("nullable")),
        external_docs=dict(docs) if docs is not None else None,
        example=schema.get("example"),
    )


def _extensions(schema: Schema) -> Extensions:
    preserve = schema.get("x-kubernetes-preserve-unknown-fields")
    if preserve is not None and not preserve:
        raise StructuralError(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
        )
    keys = schema.get("x-kubernetes-list-map-keys")
    return Extensions(
        preserve_unknown_fields=bool(preserve),
        embedded_resource=bool(schema.get("x-kubernetes-embedded-resource")),
        int_or_string=bool(schema.get("x-kubernetes-int-or-string")),
        list_map_keys=list(keys) if keys is not None else None,
        list_type=schema.get("x-kubernetes-list-type"),
        map_type=schema.get("x-kubernetes-map-type"),
    )


def _rules(schema: Schema) -> list[dict[str, Any]] | None:
    rules = schema.get("x-kubernetes-validations")
    return [dict(r) for r in rules] if rules is not None else None


def _clauses(schema: Schema, key: str) -> list[NestedValueValidation] | None:
    # Go appends clause by clause to a nil slice: an empty list stays nil
    clauses = [_required_nested(_nested(c)) for c in schema.get(key) or []]
    return clauses or None


def _required_nested(node: NestedValueValidation | None) -> NestedValueValidation:
    assert node is not None
    return node


def _value_validation(schema: Schema) -> ValueValidation:
    enum = schema.get("enum")
    required = schema.get("required")
    return ValueValidation(
        format=schema.get("format") or "",
        maximum=schema.get("maximum"),
        exclusive_maximum=bool(schema.get("exclusiveMaximum")),
        minimum=schema.get("minimum"),
        exclusive_minimum=bool(schema.get("exclusiveMinimum")),
        max_length=schema.get("maxLength"),
        min_length=schema.get("minLength"),
        pattern=schema.get("pattern") or "",
        max_items=schema.get("maxItems"),
        min_items=schema.get("minItems"),
        unique_items=bool(schema.get("uniqueItems")),
        multiple_of=schema.get("multipleOf"),
        enum=list(enum) if enum else None,
        max_properties=schema.get("maxProperties"),
        min_properties=schema.get("minProperties"),
        required=list(required) if required is not None else None,
        not_=_nested(schema.get("not")),
        all_of=_clauses(schema, "allOf"),
        any_of=_clauses(schema, "anyOf"),
        one_of=_clauses(schema, "oneOf"),
    )


def new_nested(schema: Schema | None) -> NestedValueValidation | None:
    """A junctor clause (``allOf``/``anyOf``/``oneOf``/``not`` entry) in structural form."""
    return _nested(schema)


def _nested(schema: Schema | None) -> NestedValueValidation | None:
    if schema is None:
        return None
    _check_unsupported(schema)
    node = NestedValueValidation(
        value_validation=_value_validation(schema),
        forbidden_generics=_generic(schema),
        forbidden_extensions=_extensions(schema),
        x_validations=_rules(schema),
    )
    items = schema.get("items")
    if items is not None:
        if isinstance(items, list):
            if items:
                raise StructuralError("OpenAPIV3Schema 'items' must be a schema, but is an array")
        else:
            node.items = _nested(items)
    properties = schema.get("properties")
    if properties is not None:
        node.properties = {k: _required_nested(_nested(v)) for k, v in sorted(properties.items())}
    additional = schema.get("additionalProperties")
    if isinstance(additional, Mapping):
        node.additional_properties = _nested(additional)
    elif additional:
        node.additional_properties = NestedValueValidation()
    return node


# --- back to JSONSchemaProps (upstream's ToKubeOpenAPI, used by the roundtrip property) -----


def to_props(node: Structural) -> dict[str, Any]:
    """The JSONSchemaProps dict this structural schema stands for."""
    out = _generic_props(node.generic)
    out.update(_extension_props(node.extensions))
    if node.value_validation is not None:
        out.update(_value_props(node.value_validation))
    if node.x_validations is not None:
        out["x-kubernetes-validations"] = [dict(r) for r in node.x_validations]
    if node.items is not None:
        out["items"] = to_props(node.items)
    if node.properties:
        out["properties"] = {k: to_props(v) for k, v in node.properties.items()}
    if node.additional_properties is not None:
        ap = node.additional_properties
        out["additionalProperties"] = to_props(ap.structural) if ap.structural else ap.allows
    return out


def _nested_props(node: NestedValueValidation) -> dict[str, Any]:
    out = _generic_props(node.forbidden_generics)
    out.update(_extension_props(node.forbidden_extensions))
    out.update(_value_props(node.value_validation))
    if node.x_validations is not None:
        out["x-kubernetes-validations"] = [dict(r) for r in node.x_validations]
    if node.items is not None:
        out["items"] = _nested_props(node.items)
    if node.properties is not None:
        out["properties"] = {k: _nested_props(v) for k, v in node.properties.items()}
    if node.additional_properties is not None:
        out["additionalProperties"] = _nested_props(node.additional_properties)
    return out


def _generic_props(g: Generic) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (("type", g.type), ("description", g.description), ("title", g.title)):
        if value:
            out[key] = value
    if g.nullable:
        out["nullable"] = True
    for key, value in (("default", g.default), ("example", g.example)):
        if value is not None:
            out[key] = value
    if g.external_docs is not None:
        out["externalDocs"] = dict(g.external_docs)
    return out


def _extension_props(x: Extensions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    flags = (
        ("x-kubernetes-preserve-unknown-fields", x.preserve_unknown_fields),
        ("x-kubernetes-embedded-resource", x.embedded_resource),
        ("x-kubernetes-int-or-string", x.int_or_string),
    )
    out.update({k: True for k, v in flags if v})
    if x.list_map_keys is not None:
        out["x-kubernetes-list-map-keys"] = list(x.list_map_keys)
    if x.list_type is not None:
        out["x-kubernetes-list-type"] = x.list_type
    if x.map_type is not None:
        out["x-kubernetes-map-type"] = x.map_type
    return out


_VALUE_KEYS = (
    ("format", "format"),
    ("maximum", "maximum"),
    ("exclusive_maximum", "exclusiveMaximum"),
    ("minimum", "minimum"),
    ("exclusive_minimum", "exclusiveMinimum"),
    ("max_length", "maxLength"),
    ("min_length", "minLength"),
    ("pattern", "pattern"),
    ("max_items", "maxItems"),
    ("min_items", "minItems"),
    ("unique_items", "uniqueItems"),
    ("multiple_of", "multipleOf"),
    ("enum", "enum"),
    ("max_properties", "maxProperties"),
    ("min_properties", "minProperties"),
    ("required", "required"),
)


def _value_props(v: ValueValidation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, key in _VALUE_KEYS:
        value = getattr(v, attr)
        if value is None or value is False or value == "":
            continue
        out[key] = list(value) if isinstance(value, list) else value
    for attr, key in (("all_of", "allOf"), ("one_of", "oneOf"), ("any_of", "anyOf")):
        clauses = getattr(v, attr)
        if clauses:
            out[key] = [_nested_props(c) for c in clauses]
    if v.not_ is not None:
        out["not"] = _nested_props(v.not_)
    return out
