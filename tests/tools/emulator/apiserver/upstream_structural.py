"""kube-apiserver's own structural-schema cases, restated as data.

Source: kubernetes/apiextensions-apiserver v0.36.3, ``pkg/apiserver/schema/
validation_test.go`` and ``convert_test.go``. Upstream writes these over its Go
``Structural`` type; here each schema is the JSONSchemaProps it stands for. Three of the
upstream tests fill fields by reflection and random fuzzing; they are restated as one case
per field they range over (the same fields, a fixed non-empty value each).
``TestStructuralRoundtripOrError`` (a fuzzed roundtrip) is restated as a hypothesis
property in the test module.
"""

from __future__ import annotations

from typing import Any

SOURCE = "kubernetes/apiextensions-apiserver v0.36.3 pkg/apiserver/schema/validation_test.go"

# TestValidateStructuralMetadataInvariants, loop 1: metadata at the root must be an object
METADATA_TYPES: list[dict[str, Any]] = [
    {"name": f"type {t}", "metadata": {"type": t}, "refused": t != "object"}
    for t in ("object", "array", "number", "integer", "boolean", "string")
]

# loop 2: a property of metadata named after each field of metav1.ObjectMeta (upstream uses
# the Go field names, so even "Name" and "GenerateName" are refused: only the lower-case
# name and generateName are allowed)
OBJECT_META_FIELDS = [
    "Name",
    "GenerateName",
    "Namespace",
    "SelfLink",
    "UID",
    "ResourceVersion",
    "Generation",
    "CreationTimestamp",
    "DeletionTimestamp",
    "DeletionGracePeriodSeconds",
    "Labels",
    "Annotations",
    "OwnerReferences",
    "Finalizers",
    "ManagedFields",
]
METADATA_PROPERTIES: list[dict[str, Any]] = [
    {
        "name": f"property {p}",
        "metadata": {"type": "object", "properties": {p: {}}},
        "refused": p not in ("name", "generateName"),
    }
    for p in OBJECT_META_FIELDS
]

# loop 3: metadata {type: object, properties: {name, generateName}} plus one more field of
# the Structural type (each set non-empty): allowed only without it
_NAME_AND_GENERATE_NAME = {"name": {}, "generateName": {}}
METADATA_FIELDS: list[dict[str, Any]] = [
    {"name": "type and properties only", "extra": {}, "refused": False},
    {"name": "Items", "extra": {"items": {"type": "string"}}, "refused": True},
    {"name": "AdditionalProperties", "extra": {"additionalProperties": True}, "refused": True},
    {"name": "Generic.Description", "extra": {"description": "d"}, "refused": True},
    {"name": "Generic.Title", "extra": {"title": "t"}, "refused": True},
    {"name": "Generic.Nullable", "extra": {"nullable": True}, "refused": True},
    {"name": "Generic.ExternalDocs", "extra": {"externalDocs": {"url": "u"}}, "refused": True},
    {"name": "Generic.Example", "extra": {"example": 42.0}, "refused": True},
    {
        "name": "Extensions.XPreserveUnknownFields",
        "extra": {"x-kubernetes-preserve-unknown-fields": True},
        "refused": True,
    },
    {
        "name": "Extensions.XEmbeddedResource",
        "extra": {"x-kubernetes-embedded-resource": True},
        "refused": True,
    },
    {
        "name": "Extensions.XIntOrString",
        "extra": {"x-kubernetes-int-or-string": True},
        "refused": True,
    },
    {
        "name": "Extensions.XListMapKeys",
        "extra": {"x-kubernetes-list-map-keys": ["k"]},
        "refused": True,
    },
    {"name": "Extensions.XListType", "extra": {"x-kubernetes-list-type": "set"}, "refused": True},
    {"name": "Extensions.XMapType", "extra": {"x-kubernetes-map-type": "atomic"}, "refused": True},
    {
        "name": "ValidationExtensions.XValidations",
        "extra": {"x-kubernetes-validations": [{"rule": "true"}]},
        "refused": True,
    },
    {"name": "ValueValidation.MaxLength", "extra": {"maxLength": 1}, "refused": True},
    {"name": "ValueValidation.Required", "extra": {"required": ["name"]}, "refused": True},
    {
        "name": "Generic.Default (checked by API validation instead)",
        "extra": {"default": {}},
        "refused": False,
    },
]

# TestValidateStructuralCompleteness (upstream's table): the option names are upstream's
COMPLETENESS: list[dict[str, Any]] = [
    {
        "name": "allowed properties valuevalidation, additional properties structure",
        "schema": {
            "allOf": [{"properties": {"foo": {"minLength": 2}}}],
            "additionalProperties": {"type": "object", "properties": {"bar": {"type": "string"}}},
        },
        "options": {"AllowValidationPropertiesWithAdditionalProperties": True},
    },
    {
        "name": "disallowed properties valuevalidation, additional properties structure",
        "schema": {
            "allOf": [{"properties": {"foo": {"minLength": 2}}}],
            "additionalProperties": {"type": "object", "properties": {"bar": {"type": "string"}}},
        },
        "error": "properties[foo]: Required value: because it is defined in "
        "allOf[0].properties[foo]",
        "options": {"AllowValidationPropertiesWithAdditionalProperties": False},
    },
    {
        "name": "disallowed additionalproperties valuevalidation, properties structure",
        "schema": {
            "allOf": [{"additionalProperties": {"minLength": 2}}],
            "properties": {"bar": {"type": "string"}},
        },
        "error": "additionalProperties: Required value: because it is defined in "
        "allOf[0].additionalProperties",
        "options": {"AllowNestedAdditionalProperties": True},
    },
    {
        "name": "allowed property in valuevalidation, and in structure",
        "schema": {
            "allOf": [{"properties": {"foo": {"minLength": 2}}}],
            "properties": {"foo": {"type": "string"}},
        },
    },
    {
        "name": "disallowed property in valuevalidation, and in structure",
        "schema": {
            "allOf": [{"properties": {"notfoo": {"minLength": 2}}}],
            "properties": {"foo": {"type": "string"}},
        },
        "error": "properties[notfoo]: Required value: because it is defined in "
        "allOf[0].properties[notfoo]",
    },
    {
        "name": "allowed items in valuevalidation, and in structure",
        "schema": {
            "type": "array",
            "allOf": [{"items": {"minLength": 2}}],
            "items": {"type": "string"},
        },
    },
    {
        "name": "disallowed items in valuevalidation, and not in structure",
        "schema": {
            "type": "object",
            "allOf": [{"items": {"minLength": 2}}],
            "properties": {"foo": {"type": "string"}},
        },
        "error": "items: Required value: because it is defined in allOf[0].items",
    },
]

# TestValidateNestedValueValidationComplete: each forbidden field of a junctor clause
# (Generic fields but ExternalDocs and Example; every Extensions field) is refused, and
# x-kubernetes-validations / additionalProperties only without the option that allows them
NESTED_FORBIDDEN: list[dict[str, Any]] = [
    {"name": "ForbiddenGenerics.Description", "clause": {"description": "d"}},
    {"name": "ForbiddenGenerics.Type", "clause": {"type": "string"}},
    {"name": "ForbiddenGenerics.Title", "clause": {"title": "t"}},
    {"name": "ForbiddenGenerics.Default", "clause": {"default": 42.0}},
    {"name": "ForbiddenGenerics.Nullable", "clause": {"nullable": True}},
    {
        "name": "ForbiddenExtensions.XPreserveUnknownFields",
        "clause": {"x-kubernetes-preserve-unknown-fields": True},
    },
    {
        "name": "ForbiddenExtensions.XEmbeddedResource",
        "clause": {"x-kubernetes-embedded-resource": True},
    },
    {"name": "ForbiddenExtensions.XIntOrString", "clause": {"x-kubernetes-int-or-string": True}},
    {"name": "ForbiddenExtensions.XListMapKeys", "clause": {"x-kubernetes-list-map-keys": ["k"]}},
    {"name": "ForbiddenExtensions.XListType", "clause": {"x-kubernetes-list-type": "atomic"}},
    {"name": "ForbiddenExtensions.XMapType", "clause": {"x-kubernetes-map-type": "atomic"}},
]
NESTED_ALLOWED_BY_OPTION: list[dict[str, Any]] = [
    {
        "name": f"{field} with {option}={allowed}",
        "clause": clause,
        "options": {option: allowed},
        "refused": not allowed,
    }
    for field, clause, option in (
        (
            "XValidations",
            {"x-kubernetes-validations": [{"rule": "true"}]},
            "AllowNestedXValidations",
        ),
        ("AdditionalProperties", {"additionalProperties": {}}, "AllowNestedAdditionalProperties"),
    )
    for allowed in (False, True)
]
